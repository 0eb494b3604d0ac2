package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"resnetlab/fsutil"
	"resnetlab/spec"
	"strings"
	"unicode/utf8"
)

// Status is how a run ended, as its result file records it.
type Status string

// Run statuses.
const (
	StatusDone        Status = "done"        // trained every epoch (and reached target_acc, when set)
	StatusFailed      Status = "failed"      // an error stopped it, or it missed target_acc
	StatusStopped     Status = "stopped"     // the user stopped it
	StatusInterrupted Status = "interrupted" // Ctrl-C or SIGTERM: not the run's fault, resumable
)

// EpochResult is one epoch's line in results/<run>.json.
type EpochResult struct {
	Epoch   int     `json:"epoch"`
	Loss    float64 `json:"loss"`
	TestAcc float64 `json:"test_acc"`
	Seconds float64 `json:"seconds"`
}

// Result is what results/<run>.json holds.
type Result struct {
	Run             string        `json:"run"`
	Spec            string        `json:"spec"`
	Plugin          string        `json:"plugin"`
	Precision       string        `json:"precision"`
	WorldSize       int           `json:"world_size"`
	Dataset         string        `json:"dataset"`
	Backend         string        `json:"backend"`
	Devices         []string      `json:"devices"`
	Comm            string        `json:"comm,omitempty"` // host, host-staged, device or nccl
	Width           int           `json:"width"`
	BatchSize       int           `json:"batch_size"`
	Epochs          int           `json:"epochs"`
	EpochResults    []EpochResult `json:"per_epoch"`
	FinalTestAcc    float64       `json:"final_test_acc"`
	BestTestAcc     float64       `json:"best_test_acc"`
	PerClassAcc     []float64     `json:"per_class_acc"`
	TrainSeconds    float64       `json:"train_seconds"`
	ImagesPerSecond float64       `json:"images_per_second"`
	PeakDeviceBytes []int64       `json:"peak_device_bytes_per_rank"`
	// PeakHostBytes is each rank's peak host memory: the host bytes
	// outside its backend (MemoryUsage.HostPeak), plus the backend's own
	// peak on the CPU backend, whose device is host memory.
	PeakHostBytes []int64 `json:"peak_host_bytes_per_rank"`
	// Gemini is each rank's Gemini memory statistics (gemini runs only).
	Gemini      []GeminiMemStats `json:"gemini_memstats_per_rank,omitempty"`
	ModelSHA256 string           `json:"model_sha256"`
	Status      Status           `json:"status"`
	Error       string           `json:"error,omitempty"`
}

// ResultPath is where WriteResult puts r: DIR/<spec>-<run>.json (see
// spec.ResultFile).
func ResultPath(dir string, r *Result) string {
	return filepath.Join(dir, spec.ResultFile(r.Spec, r.Run))
}

// WriteResult writes r as indented JSON to ResultPath(dir, r), atomically,
// creating dir if needed. Non-finite numbers (a diverged loss) are written
// as null, since JSON has no NaN.
func WriteResult(dir string, r *Result) error {
	if r == nil || r.Run == "" {
		return errors.New("result has no run id")
	}
	path := ResultPath(dir, r)
	js, err := json.MarshalIndent(finiteJSON(r), "", "  ")
	if err != nil {
		return fmt.Errorf("result %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("result %s: %w", path, err)
	}
	return fsutil.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(append(js, '\n'))
		return err
	})
}

// ReadResults reads result files. Files that cannot be read or are not
// resnetlab results are skipped; the error names each of them.
func ReadResults(paths []string) ([]*Result, error) {
	var out []*Result
	var errs []error
	for _, p := range paths {
		r, err := readResult(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// maxResultBytes bounds a result JSON (a few KiB in practice).
const maxResultBytes = 16 << 20

func readResult(path string) (*Result, error) {
	b, err := fsutil.ReadFile(path, maxResultBytes)
	if err != nil {
		return nil, fmt.Errorf("result %s: %w", path, err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("result %s: not a result file: %v", path, err)
	}
	if r.Run == "" {
		return nil, fmt.Errorf("result %s: no \"run\" field (want a results/<spec>-<run>.json written by resnetlab)", path)
	}
	return &r, nil
}

// CompareTable lays finished runs side by side, one row per run, followed by
// the error of each failed run.
func CompareTable(rs []*Result) string {
	var b strings.Builder
	header := []string{"RUN", "PLUGIN", "PRECISION", "RANKS", "DATASET", "EPOCHS", "FINAL ACC",
		"BEST ACC", "EPOCH TIME", "IMAGES/S", "PEAK DEV MEM/RANK", "STATUS"}
	rows := [][]string{header}
	multiSpec := hasSeveralSpecs(rs)
	for _, r := range rs {
		rows = append(rows, compareRow(r, multiSpec))
	}
	width := writeAligned(&b, rows) // the header alone is over 100 columns
	for _, r := range rs {
		if r.Error != "" {
			b.WriteString(clipLine(runLabel(r, multiSpec)+": "+r.Error, width) + "\n")
		}
	}
	return b.String()
}

// clipLine puts s on one line of at most width characters (the table's), ending with an
// ellipsis when it was cut. A run's error can be pages long (every rank's
// error joined, a stack of causes over several lines); under the table it
// only has to say what went wrong, the result's JSON keeps all of it.
func clipLine(s string, width int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width-1]) + "…"
}

func hasSeveralSpecs(rs []*Result) bool {
	for _, r := range rs {
		if r.Spec != rs[0].Spec {
			return true
		}
	}
	return false
}

func runLabel(r *Result, withSpec bool) string {
	if withSpec && r.Spec != "" {
		return r.Spec + "/" + r.Run
	}
	return r.Run
}

func compareRow(r *Result, multiSpec bool) []string {
	done := len(r.EpochResults)
	final, epochTime := "-", "-"
	if done > 0 {
		final = pct(r.FinalTestAcc)
		var sum float64
		for _, e := range r.EpochResults {
			sum += e.Seconds
		}
		epochTime = fmt.Sprintf("%.1fs", sum/float64(done))
	}
	best := "-"
	if done > 0 {
		best = pct(r.BestTestAcc)
	}
	ips := "-"
	if r.ImagesPerSecond > 0 {
		ips = fmt.Sprintf("%.0f", r.ImagesPerSecond)
	}
	return []string{runLabel(r, multiSpec), r.Plugin, r.Precision, fmt.Sprint(r.WorldSize), r.Dataset,
		fmt.Sprintf("%d/%d", done, r.Epochs), final, best, epochTime, ips, peakMem(r.PeakDeviceBytes),
		string(r.Status)}
}

func pct(f float64) string { return fmt.Sprintf("%.2f%%", 100*f) }

// peakMem is the largest per-rank device peak ("-" when none was measured).
func peakMem(peaks []int64) string {
	var m int64
	for _, p := range peaks {
		m = max(m, p)
	}
	if m == 0 {
		return "-"
	}
	return spec.FormatSize(m)
}

// writeAligned writes rows as left-aligned columns two spaces apart and
// returns the width of the widest line.
func writeAligned(b *strings.Builder, rows [][]string) int {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	for _, row := range rows {
		line := ""
		for i, c := range row {
			line += c
			if i < len(row)-1 {
				line += strings.Repeat(" ", width[i]-len(c)+2)
			}
		}
		b.WriteString(line + "\n")
	}
	total := 2 * (len(width) - 1)
	for _, w := range width {
		total += w
	}
	return total
}

// GeminiMemStats is one rank's Gemini memory statistics over a run.
type GeminiMemStats struct {
	Rank  int `json:"rank"`
	Steps int `json:"steps"`
	// H2DBytes and D2HBytes are the chunk bytes moved in the training
	// steps (ColossalAI's memstats); EvalH2DBytes and EvalD2HBytes those
	// the evaluations moved between them. Their sum is every chunk move
	// of the run, as the TUI and the run's log count them.
	H2DBytes          int64        `json:"h2d_bytes"`
	D2HBytes          int64        `json:"d2h_bytes"`
	EvalH2DBytes      int64        `json:"eval_h2d_bytes"`
	EvalD2HBytes      int64        `json:"eval_d2h_bytes"`
	Evictions         int          `json:"evictions"`
	EvictSeconds      float64      `json:"evict_seconds"`
	PeakDeviceBytes   int64        `json:"peak_device_bytes"`
	PeakHostTierBytes int64        `json:"peak_host_tier_bytes"`
	NonModelPeakBytes int64        `json:"non_model_peak_bytes"`
	ChunkWastePct     float64      `json:"chunk_waste_pct"`
	NonModelPerOp     []OpBytes    `json:"non_model_peak_per_op,omitempty"`
	Chunks            []ChunkPlace `json:"chunks,omitempty"`
}

// OpBytes is one traced operator's non-model peak.
type OpBytes struct {
	Op    string `json:"op"`
	Bytes int64  `json:"bytes"`
}

// ChunkPlace is where a chunk's parameter and optimizer parts live.
type ChunkPlace struct {
	ID     int    `json:"id"`
	Bytes  int64  `json:"bytes"`
	Params string `json:"params"`
	Optim  string `json:"optim"`
}
