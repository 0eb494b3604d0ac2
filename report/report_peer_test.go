package report

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const peerSample = `/usr/lib/python3/dist-packages/torch/warning: something {not json}
2026-05-01T10:00:00 {"epoch": 1, "loss": 1.52, "test_acc": 0.51, "epoch_s": 20.5}
{"epoch": 2, "loss": 1.01, "test_acc": 0.66, "epoch_s": 6.5}
{"epoch": 3, "loss": 0.85, "test_acc": 0.64, "epoch_s": 6.0}
{"summary": true, "amp": true, "data": "/data/fmnist", "epochs": 3, "total_s": 33.4, "final_acc": 0.64}
`

func TestReportPeerLog(t *testing.T) {
	p, err := ParsePeerLog("runs/peer_amp.log", strings.NewReader(peerSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Epochs) != 3 || p.Epochs[1] != (EpochResult{2, 1.01, 0.66, 6.5}) || p.Summary == nil ||
		!p.Summary.AMP || p.Summary.TotalSeconds != 33.4 {
		t.Fatalf("parsed %+v summary %+v", p.Epochs, p.Summary)
	}
	row := p.Row()
	want := Row{Label: "peer: peer_amp", Source: SourcePeer, Plugin: "pytorch", Precision: "fp16",
		Dataset: "fashion-mnist", WorldSize: 1, EpochsDone: 3, EpochsPlanned: 3, HasFinal: true, FinalAcc: 0.64,
		BestAcc: 0.66, BestEpoch: 2, WallSeconds: 33.4, Status: "done"}
	row.Curve, row.MeanEpochSeconds = nil, math.Round(row.MeanEpochSeconds*1000)/1000
	want.MeanEpochSeconds = 11
	if !reflect.DeepEqual(row, want) {
		t.Errorf("row\n %+v\nwant\n %+v", row, want)
	}
}

// A log cut before the summary: status incomplete, wall time from the
// epochs, precision unknown, data set set by the caller.
func TestReportPeerLogCut(t *testing.T) {
	cut := strings.Join(strings.Split(peerSample, "\n")[:3], "\n")
	p, err := ParsePeerLog("cut.log", strings.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	p.Dataset = "cifar10"
	row := p.Row()
	if row.Status != "incomplete" || row.Precision != "" || row.WallSeconds != 27 || row.FinalAcc != 0.66 ||
		row.BestEpoch != 2 || row.EpochsPlanned != 0 {
		t.Errorf("cut log row %+v", row)
	}
	rows := Build(reportResults()[1:2], []*PeerLog{p}, false)
	cells := byColumn(markdownTable(t, Markdown(rows)))
	if got := cells["peer: cut"]["Δ vs torch_ddp-fp32-1 (pts)"]; got != "+6.00" {
		t.Errorf("peer delta %q, want +6.00", got)
	}
}

func TestReportPeerLogErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.log"), "missing.log"},
		{write("empty.log", "just text\n"), "empty.log: no scripts/torch_peer_resume.py lines"},
		{write("result.json", `{"run": "x", "per_epoch": []}`), "result.json: no scripts/torch_peer_resume.py lines"},
		{write("bad.log", "{\"epoch\": 1, \"test_acc\": 0.5}\n{\"epoch\": 2, \"test_acc\": oops}\n"), "bad.log:2: bad torch_peer_resume.py line"},
		{write("twice.log", "{\"epoch\": 1, \"test_acc\": 0.5}\n{\"epoch\": 1, \"test_acc\": 0.5}\n"), "twice.log:2: epoch 1 after epoch 1"},
		{write("noacc.log", "{\"epoch\": 1, \"loss\": 0.5}\n"), "noacc.log:1: epoch 1 has no test_acc"},
	} {
		_, err := ReadPeerLog(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.path, err, tc.want)
		}
	}
}

// A real log of the PyTorch peer: 80 epochs of the recipe on Fashion-MNIST,
// fp32, one H200 (the fp32 peer row of docs/results.md).
func TestReportPeerLogReal(t *testing.T) {
	p, err := ReadPeerLog(filepath.Join("testdata", "peer80_fp32.log"))
	if err != nil {
		t.Fatal(err)
	}
	row := p.Row()
	if row.EpochsDone != 80 || row.Status != "done" || pct(row.FinalAcc) != "93.16%" ||
		pct(row.BestAcc) != "93.37%" || row.BestEpoch != 71 || row.Precision != "fp32" {
		t.Errorf("peer log row: %d epochs, %s, final %s, best %s at %d, %s", row.EpochsDone, row.Status,
			pct(row.FinalAcc), pct(row.BestAcc), row.BestEpoch, row.Precision)
	}
}

func TestReportReadResultErrorsNameFile(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "notes.json")
	if err := os.WriteFile(notJSON, []byte("epoch 1: 50%\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	_, err := ReadResults([]string{missing, notJSON})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), notJSON+": not a result file") {
		t.Errorf("error %v does not name both files", err)
	}
}

// torch_peer_resume.py's first line names precision, data and planned
// epochs, so a log cut before its summary (and resumed across calls) still
// reports them.
func TestReportPeerLogArgsLine(t *testing.T) {
	log := `{"args": {"amp": true, "data": ".dev/fmnist", "epochs": 80, "seed": 0}}
{"epoch": 1, "loss": 0.47, "test_acc": 0.83, "epoch_s": 23.0}
{"resumed_from": 1}
{"epoch": 2, "loss": 0.41, "test_acc": 0.81, "epoch_s": 6.0}
`
	p, err := ParsePeerLog("peer80_amp.log", strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	row := p.Row()
	if row.Precision != "fp16" || row.Dataset != "fashion-mnist" || row.EpochsPlanned != 80 ||
		row.EpochsDone != 2 || row.Status != "incomplete" {
		t.Fatalf("row %+v, want fp16 fashion-mnist 2/80 incomplete", row)
	}
}
