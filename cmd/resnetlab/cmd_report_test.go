package main

import (
	"bytes"
	"encoding/xml"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"resnetlab/report"
)

func reportFixtures(t *testing.T) (dir string, rs []*report.Result, peer string) {
	t.Helper()
	dir = t.TempDir()
	rs = []*report.Result{
		{Run: "torch_ddp-fp32-1", Spec: "zero", Plugin: "torch_ddp", Precision: "fp32", WorldSize: 1,
			Dataset: "cifar10", Epochs: 2, EpochResults: []report.EpochResult{
				{Epoch: 1, Loss: 2, TestAcc: 0.4, Seconds: 10},
				{Epoch: 2, Loss: 1, TestAcc: 0.6, Seconds: 10}},
			FinalTestAcc: 0.6, BestTestAcc: 0.6, TrainSeconds: 20, Status: "done"},
		{Run: "gemini-fp16-2", Spec: "zero", Plugin: "gemini", Precision: "fp16", WorldSize: 2,
			Dataset: "cifar10", Epochs: 2, EpochResults: []report.EpochResult{
				{Epoch: 1, Loss: 2, TestAcc: 0.5, Seconds: 8},
				{Epoch: 2, Loss: 1, TestAcc: 0.7, Seconds: 8}},
			FinalTestAcc: 0.7, BestTestAcc: 0.7, TrainSeconds: 16, Status: "done"},
	}
	for _, r := range rs {
		if err := report.WriteResult(filepath.Join(dir, "results"), r); err != nil {
			t.Fatal(err)
		}
	}
	peer = filepath.Join(dir, "peer.log")
	log := `{"epoch": 1, "loss": 1.5, "test_acc": 0.45, "epoch_s": 7.0}` + "\n" +
		`{"epoch": 2, "loss": 1.1, "test_acc": 0.62, "epoch_s": 7.0}` + "\n"
	if err := os.WriteFile(peer, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, rs, peer
}

func TestReportCommand(t *testing.T) {
	dir, rs, peer := reportFixtures(t)
	md, plot := filepath.Join(dir, "docs", "results.md"), filepath.Join(dir, "docs", "acc.png")
	c, out, errb := testCLI()
	code := runCLI(c, "report", "-o", md, "--plot", plot, "--peer", peer, "--peer-data", "cifar10",
		"--reference", filepath.Join(dir, "results"))
	if code != exitOK || out.Len() != 0 {
		t.Fatalf("code %d stdout %q stderr %q", code, out, errb)
	}
	p, err := report.ReadPeerLog(peer)
	if err != nil {
		t.Fatal(err)
	}
	p.Dataset = "cifar10"
	want := report.Markdown(report.Build(rs, []*report.PeerLog{p}, true))
	if got, _ := os.ReadFile(md); string(got) != want {
		t.Fatalf("report file\n%s\nwant\n%s", got, want)
	}
	for _, s := range []string{"| peer: peer | peer |", "| +2.00 |", "reference: Gemini", "| +10.00 |"} {
		if !strings.Contains(want, s) {
			t.Errorf("report lacks %q:\n%s", s, want)
		}
	}
	b, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Size() != image.Pt(report.DefaultPlotWidth, report.DefaultPlotHeight) {
		t.Fatalf("plot: %v %v", err, img)
	}

	// An .svg plot is SVG, not PNG bytes.
	svg := filepath.Join(dir, "docs", "acc.svg")
	if code := runCLI(c, "report", "-o", md, "--plot", svg, filepath.Join(dir, "results")); code != exitOK {
		t.Fatalf("svg: code %d stderr %q", code, errb)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<svg ")) || xml.Unmarshal(b, new(struct{})) != nil {
		t.Fatalf("svg plot: %v %.100q", err, b)
	}

	// Without -o the table goes to stdout; files may be listed one by one.
	c, out, errb = testCLI()
	files := []string{report.ResultPath(filepath.Join(dir, "results"), rs[0]), report.ResultPath(filepath.Join(dir, "results"), rs[1])}
	if code := runCLI(c, append([]string{"report"}, files...)...); code != exitOK ||
		out.String() != report.Markdown(report.Build(rs, nil, false)) {
		t.Fatalf("stdout report: code %d\n%s\nstderr %s", code, out, errb)
	}
}

func TestReportCommandErrors(t *testing.T) {
	dir, rs, peer := reportFixtures(t)
	good := report.ResultPath(filepath.Join(dir, "results"), rs[0])
	notJSON := filepath.Join(dir, "notes.json")
	if err := os.WriteFile(notJSON, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(dir, "out.md")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{good, filepath.Join(dir, "missing.json")}, "missing.json"},
		{[]string{good, notJSON}, notJSON + ": not a result file"},
		{[]string{"--peer", filepath.Join(dir, "nopeer.log"), good}, "nopeer.log"},
		{[]string{"--peer", good, good}, good + ": no torch_peer.py lines"},
		{[]string{"--plot", filepath.Join(dir, "p.png"), "--reference", "--peer", peer}, ""}, // peer alone is fine
		{[]string{"--plot", filepath.Join(dir, "x.txt"), good}, filepath.Join(dir, "x.txt") + `: unknown picture format ".txt"`},
	} {
		c, _, errb := testCLI()
		code := runCLI(c, append([]string{"report", "-o", md}, tc.args...)...)
		if tc.want == "" {
			if code != exitOK {
				t.Errorf("%v: code %d %s", tc.args, code, errb)
			}
			os.Remove(md)
			continue
		}
		if code != exitFailed || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: code %d, stderr %q, want it to name %q", tc.args, code, errb, tc.want)
		}
		if _, err := os.Stat(md); err == nil {
			t.Errorf("%v: report written despite the error", tc.args)
		}
	}
	c, _, errb := testCLI()
	if code := runCLI(c, "report", "--reference"); code != exitUsage || !strings.Contains(errb.String(), "at least one") {
		t.Errorf("no inputs: %d %q", code, errb)
	}
}
