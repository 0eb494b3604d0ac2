package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"resnetlab/fsutil"
	"strings"
)

// PeerLog is what the PyTorch peer (scripts/torch_peer_resume.py)
// printed: one JSON line per epoch ({"epoch", "loss", "test_acc",
// "epoch_s"}) and, when it ran to the end, a summary line ({"summary":
// true, "amp", "data", "epochs", "total_s", "final_acc"}).
type PeerLog struct {
	Path    string
	Epochs  []EpochResult
	Summary *PeerSummary // nil when the log was cut before the end
	// Args is scripts/torch_peer_resume.py's first line ({"args": {"amp",
	// "data", "epochs"}}): a log cut before its summary still says its
	// precision and data set.
	Args *PeerSummary
	// Dataset is the data set's name: from the summary, or set by the
	// caller for a log without one.
	Dataset string
}

// PeerSummary is torch_peer_resume.py's last line.
type PeerSummary struct {
	Summary      bool    `json:"summary"`
	AMP          bool    `json:"amp"`
	Data         string  `json:"data"`
	Epochs       int     `json:"epochs"`
	TotalSeconds float64 `json:"total_s"`
	FinalAcc     float64 `json:"final_acc"`
}

// peerLine holds either kind of line; pointers tell absent from zero.
type peerLine struct {
	Epoch   *int         `json:"epoch"`
	Loss    float64      `json:"loss"`
	TestAcc *float64     `json:"test_acc"`
	Seconds float64      `json:"epoch_s"`
	Args    *PeerSummary `json:"args"`
	PeerSummary
}

// ReadPeerLog reads a torch_peer_resume.py log file.
func ReadPeerLog(path string) (*PeerLog, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("peer log %s: %w", path, err)
	}
	defer f.Close()
	return ParsePeerLog(path, f)
}

// ParsePeerLog parses a torch_peer_resume.py log. Lines that are not JSON
// objects (warnings, shell noise) are skipped, as is text before the first
// '{' (timestamps); a JSON line that does not parse, an epoch line without
// test_acc or epochs out of order (two runs in one file) are errors naming
// path and line.
func ParsePeerLog(path string, r io.Reader) (*PeerLog, error) {
	p := &PeerLog{Path: path}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		if err := p.addLine(sc.Text()); err != nil {
			return nil, fmt.Errorf("peer log %s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("peer log %s: %w", path, err)
	}
	if len(p.Epochs) == 0 && p.Summary == nil {
		return nil, fmt.Errorf("peer log %s: no scripts/torch_peer_resume.py lines (want JSON lines like "+
			`{"epoch": 1, "loss": 0.47, "test_acc": 0.83, "epoch_s": 23.0})`, path)
	}
	return p, nil
}

func (p *PeerLog) addLine(line string) error {
	i := strings.IndexByte(line, '{')
	if i < 0 {
		return nil
	}
	var l peerLine
	if err := json.Unmarshal([]byte(line[i:]), &l); err != nil {
		if strings.Contains(line, `"epoch"`) || strings.Contains(line, `"summary"`) {
			return fmt.Errorf("bad torch_peer_resume.py line %q: %v", line, err)
		}
		return nil // some other braces
	}
	switch {
	case l.Summary:
		s := l.PeerSummary
		p.Summary = &s
		p.Dataset = peerDataset(s.Data)
	case l.Args != nil:
		p.Args = l.Args
		if p.Dataset == "" {
			p.Dataset = peerDataset(l.Args.Data)
		}
	case l.Epoch != nil:
		return p.addEpoch(l)
	}
	return nil
}

func (p *PeerLog) addEpoch(l peerLine) error {
	if l.TestAcc == nil {
		return fmt.Errorf("epoch %d has no test_acc", *l.Epoch)
	}
	if n := len(p.Epochs); n > 0 && *l.Epoch <= p.Epochs[n-1].Epoch {
		return fmt.Errorf("epoch %d after epoch %d (want one torch_peer_resume.py run per file)",
			*l.Epoch, p.Epochs[n-1].Epoch)
	}
	if p.Summary != nil {
		return fmt.Errorf("epoch %d after the summary line (want one torch_peer_resume.py run per file)", *l.Epoch)
	}
	p.Epochs = append(p.Epochs, EpochResult{Epoch: *l.Epoch, Loss: l.Loss, TestAcc: *l.TestAcc, Seconds: l.Seconds})
	return nil
}

// peerDataset names the data set of torch_peer_resume.py's --data:
// "synthetic", or a directory of Fashion-MNIST IDX files (the only files
// it reads).
func peerDataset(data string) string {
	if data == "synthetic" {
		return "synthetic"
	}
	return "fashion-mnist"
}

// Row is the report row of the peer run.
func (p *PeerLog) Row() Row {
	name := strings.TrimSuffix(filepath.Base(p.Path), filepath.Ext(p.Path))
	row := Row{
		Label: "peer: " + name, Source: SourcePeer, Plugin: "pytorch", Dataset: p.Dataset, WorldSize: 1,
		EpochsDone: len(p.Epochs), Curve: evaluatedEpochs(p.Epochs), Status: "incomplete",
		MeanEpochSeconds: meanEpochSeconds(p.Epochs),
	}
	final := 0.0
	if n := len(p.Epochs); n > 0 {
		final = p.Epochs[n-1].TestAcc
		row.WallSeconds = row.MeanEpochSeconds * float64(n)
	}
	if a := p.Args; a != nil { // a log cut short still knows what it ran
		row.Precision, row.EpochsPlanned = peerPrecision(a.AMP), a.Epochs
	}
	if s := p.Summary; s != nil {
		row.Precision, row.Status = peerPrecision(s.AMP), string(StatusDone)
		row.EpochsPlanned, final, row.WallSeconds = s.Epochs, s.FinalAcc, s.TotalSeconds
	}
	row.setAccuracy(final, 0)
	return row
}

// peerPrecision names the peer's precision: --amp is autocast + GradScaler,
// what torch_ddp_fp16 does.
func peerPrecision(amp bool) string {
	if amp {
		return "fp16"
	}
	return "fp32"
}
