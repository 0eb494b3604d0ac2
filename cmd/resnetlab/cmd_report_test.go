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
	if err := os.Mkdir(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Each file written is named on stdout, one line each, as export does.
	wrote := "wrote " + md + "\nwrote " + plot + "\n"
	c, out, errb := testCLI()
	code := runCLI(c, "report", "-o", md, "--plot", plot, "--peer", peer, "--peer-data", "CIFAR-10", // an alias: the canonical name's row
		"--reference", filepath.Join(dir, "results"))
	if code != exitOK || out.String() != wrote || errb.Len() != 0 {
		t.Fatalf("code %d stdout %q stderr %q, want stdout %q", code, out, errb, wrote)
	}
	alias, _ := os.ReadFile(md)
	out.Reset()
	code = runCLI(c, "report", "-o", md, "--plot", plot, "--peer", peer, "--peer-data", "cifar10",
		"--reference", filepath.Join(dir, "results"))
	if code != exitOK || out.String() != wrote || errb.Len() != 0 {
		t.Fatalf("code %d stdout %q stderr %q, want stdout %q", code, out, errb, wrote)
	}
	p, err := report.ReadPeerLog(peer)
	if err != nil {
		t.Fatal(err)
	}
	p.Dataset = "cifar10"
	want := report.Markdown(report.Build(rs, []*report.PeerLog{p}, true))
	if got, _ := os.ReadFile(md); string(got) != want || string(alias) != want {
		t.Fatalf("report file\n%s\nwith --peer-data CIFAR-10\n%s\nwant\n%s", got, alias, want)
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
	out.Reset()
	if code := runCLI(c, "report", "-o", md, "--plot", svg, filepath.Join(dir, "results")); code != exitOK ||
		out.String() != "wrote "+md+"\nwrote "+svg+"\n" {
		t.Fatalf("svg: code %d stdout %q stderr %q", code, out, errb)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<svg ")) || xml.Unmarshal(b, new(struct{})) != nil {
		t.Fatalf("svg plot: %v %.100q", err, b)
	}

	// Without -o the table goes to stdout; files may be listed one by one.
	c, out, errb = testCLI()
	files := []string{report.ResultPath(filepath.Join(dir, "results"), rs[0]), report.ResultPath(filepath.Join(dir, "results"), rs[1])}
	if code := runCLI(c, append([]string{"report"}, files...)...); code != exitOK ||
		out.String() != report.Markdown(report.Build(rs, nil, false)) || errb.Len() != 0 {
		t.Fatalf("stdout report: code %d\n%s\nstderr %s", code, out, errb)
	}
	// With the table on stdout, stdout stays the table alone: the plot
	// written is named on stderr.
	c, out, errb = testCLI()
	if code := runCLI(c, "report", "--plot", plot, files[0]); code != exitOK ||
		out.String() != report.Markdown(report.Build(rs[:1], nil, false)) || errb.String() != "wrote "+plot+"\n" {
		t.Fatalf("stdout report with --plot: code %d\n%s\nstderr %q", code, out, errb)
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
		{[]string{"--peer", good, good}, good + ": no scripts/torch_peer_resume.py lines"},
		{[]string{"--plot", filepath.Join(dir, "p.png"), "--reference", "--peer", peer}, ""}, // peer alone is fine
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
	// An unknown picture format is a bad flag value: a usage error, before
	// any input is read (here a missing one).
	pc, _, perr := testCLI()
	code := runCLI(pc, "report", "-o", md, "--plot", filepath.Join(dir, "x.txt"), filepath.Join(dir, "missing.json"))
	want := "resnetlab report: --plot " + filepath.Join(dir, "x.txt") + `: unknown picture format ".txt" (want .png or .svg)`
	if first, _, _ := strings.Cut(perr.String(), "\n"); code != exitUsage || first != want {
		t.Errorf("--plot x.txt: code %d, stderr %q, want exit 2 and %q", code, perr, want)
	}
	c, _, errb := testCLI()
	if code := runCLI(c, "report", "--reference"); code != exitUsage || !strings.Contains(errb.String(), "at least one") {
		t.Errorf("no inputs: %d %q", code, errb)
	}
}

// A --peer-data that names no data set is a usage error, before anything
// is read or written.
func TestReportRefusesUnknownPeerData(t *testing.T) {
	dir, _, peer := reportFixtures(t)
	md := filepath.Join(dir, "out.md")
	c, out, errb := testCLI()
	code := runCLI(c, "report", "-o", md, "--peer", peer, "--peer-data", "imagenet")
	first, _, _ := strings.Cut(errb.String(), "\n")
	if code != exitUsage || first != `resnetlab report: --peer-data "imagenet": want cifar10, fashion-mnist or synthetic` || out.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
	if _, err := os.Stat(md); err == nil {
		t.Error("report written despite the error")
	}
}

// An output path that cannot be written is refused in one line naming its
// flag and the path, and the run creates nothing: no directory for it, and
// not the other output either.
func TestReportOutputPaths(t *testing.T) {
	dir, rs, _ := reportFixtures(t)
	good := report.ResultPath(filepath.Join(dir, "results"), rs[0])
	md, png := filepath.Join(dir, "out.md"), filepath.Join(dir, "acc.png")
	missing := filepath.Join(dir, "nonexist", "x")
	file := good // a regular file, as a directory
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", filepath.Join(missing, "r.md")}, "-o " + filepath.Join(missing, "r.md") + ": directory " + missing + " does not exist (create it first)"},
		{[]string{"-o", dir}, "-o " + dir + ": is a directory (want a file name)"},
		{[]string{"-o", filepath.Join(file, "r.md")}, "-o " + filepath.Join(file, "r.md") + ": " + file + " is not a directory"},
		{[]string{"-o", md, "--plot", filepath.Join(missing, "acc.png")}, "--plot " + filepath.Join(missing, "acc.png") + ": directory " + missing + " does not exist (create it first)"},
		{[]string{"-o", md, "--plot", filepath.Join(dir, "results")}, "--plot " + filepath.Join(dir, "results") + ": is a directory (want a file name)"},
		{[]string{"--plot", png, "-o", filepath.Join(missing, "r.md")}, "-o " + filepath.Join(missing, "r.md") + ": directory " + missing + " does not exist"},
	} {
		c, out, errb := testCLI()
		code := runCLI(c, append(append([]string{"report"}, tc.args...), good)...)
		if code != exitFailed || !strings.HasPrefix(errb.String(), "resnetlab report: "+tc.want) || strings.Count(errb.String(), "\n") != 1 || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q\nwant exit 1 and one line: %s", tc.args, code, out, errb, tc.want)
		}
		for _, p := range []string{md, png, filepath.Dir(missing)} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%v: %s created", tc.args, p)
			}
		}
	}
}
