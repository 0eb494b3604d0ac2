package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"resnetlab/fsutil"
	"resnetlab/spec"
	"slices"
	"strconv"
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
	Comm            string        `json:"comm,omitempty"`           // host, host-staged, device or nccl
	CheckpointDir   string        `json:"checkpoint_dir,omitempty"` // where the run kept its checkpoints (the training it records)
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
		return nil, fmt.Errorf("result %s: %s", path, jsonProblem(b, err))
	}
	if r.Run == "" {
		return nil, fmt.Errorf("result %s: no \"run\" field (want a results/<spec>-<run>.json written by resnetlab)", path)
	}
	switch r.Status {
	case StatusDone, StatusFailed, StatusStopped, StatusInterrupted:
	case "":
		return nil, fmt.Errorf("result %s: no \"status\" field (want a results/<spec>-<run>.json written by resnetlab)", path)
	default:
		return nil, fmt.Errorf("result %s: key `status`: %q (want %q, %q, %q or %q)", path, r.Status,
			StatusDone, StatusFailed, StatusStopped, StatusInterrupted)
	}
	return &r, nil
}

// jsonProblem says in one line, in JSON's terms, why the JSON b did not
// decode into a Result (err, from json.Unmarshal): the byte where a file
// that is not JSON stops being JSON, the key whose value has the wrong
// type, rather than encoding/json's Go names.
func jsonProblem(b []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(b)) == 0:
		return "not a result file: empty"
	case errors.As(err, &syn):
		// Offset counts the bytes read, the bad one included; at the end
		// of b the scanner reports the end as a space it read.
		if syn.Offset <= 0 || syn.Offset > int64(len(b)) || syn.Error() == "unexpected end of JSON input" ||
			(syn.Offset == int64(len(b)) && b[len(b)-1] != ' ' && strings.HasPrefix(syn.Error(), "invalid character ' '")) {
			return fmt.Sprintf("not a result file: not JSON: it ends at byte %d inside a value (cut short?)", len(b))
		}
		c := b[syn.Offset-1]
		what := fmt.Sprintf("byte 0x%02x", c)
		if c > ' ' && c < 0x7f {
			what = fmt.Sprintf("%q", rune(c))
		}
		return fmt.Sprintf("not a result file: not JSON at byte %d (unexpected %s)", syn.Offset, what)
	case errors.As(err, &typ):
		key := "the file"
		if typ.Field != "" {
			key = "key `" + typ.Field + "`"
		}
		return fmt.Sprintf("%s: %s", key, typeProblem(typ))
	}
	return "not a result file: " + err.Error()
}

// typeProblem is a JSON value of the wrong type: "got a number (want a
// string)", or for a number that does not fit its field "got 1.5 (want a
// whole number)".
func typeProblem(e *json.UnmarshalTypeError) string {
	want := jsonTypeOf(e.Type)
	got, number, isNumber := strings.Cut(e.Value, " ") // "number 1.5" when the field is a number
	if !isNumber || got != "number" {
		return fmt.Sprintf("got %s (want %s)", article(e.Value), want)
	}
	switch e.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if f, err := strconv.ParseFloat(number, 64); err == nil && f != math.Trunc(f) {
			return fmt.Sprintf("got %s (want a whole number)", number)
		}
	}
	return fmt.Sprintf("got %s (out of range)", number)
}

// jsonTypeOf is the JSON type that decodes into t, with its article.
func jsonTypeOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonTypeOf(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another type"
}

// article puts "a" or "an" before a JSON type's name.
func article(name string) string {
	if strings.HasPrefix(name, "a") || strings.HasPrefix(name, "o") {
		return "an " + name
	}
	return "a " + name
}

// CompareTable lays finished runs side by side, one row per run, followed by
// the error of each failed run.
func CompareTable(rs []*Result) string { return CompareTableWidth(rs, 0) }

// compareColumn is one column of the compare table: its header, the
// shorter header of a table narrowed to fit a terminal, its cells, and
// when it is left out to fit (drop: lower goes first; 0 never).
type compareColumn struct {
	name, short string
	drop        int
	implied     bool // the run label says it (PLUGIN-PRECISION-RANKS): the note names it without its value
	cell        func(r *Result, label string) string
}

var compareColumns = []compareColumn{
	{"RUN", "RUN", 0, false, func(_ *Result, label string) string { return label }},
	{"PLUGIN", "PLUGIN", 1, true, func(r *Result, _ string) string { return r.Plugin }},
	{"PRECISION", "PREC", 1, true, func(r *Result, _ string) string { return r.Precision }},
	{"RANKS", "RANKS", 1, true, func(r *Result, _ string) string { return fmt.Sprint(r.WorldSize) }},
	{"DATASET", "DATASET", 2, false, func(r *Result, _ string) string { return r.Dataset }},
	{"EPOCHS", "EPOCHS", 5, false, func(r *Result, _ string) string {
		return fmt.Sprintf("%d/%d", len(r.EpochResults), r.Epochs)
	}},
	{"FINAL ACC", "FINAL", 0, false, func(r *Result, _ string) string { return accCell(r, r.FinalTestAcc) }},
	{"BEST ACC", "BEST", 4, false, func(r *Result, _ string) string { return accCell(r, r.BestTestAcc) }},
	{"EPOCH TIME", "S/EPOCH", 3, false, epochTimeCell},
	{"IMAGES/S", "IMG/S", 6, false, func(r *Result, _ string) string {
		if r.ImagesPerSecond > 0 {
			return fmt.Sprintf("%.0f", r.ImagesPerSecond)
		}
		return "-"
	}},
	{"PEAK DEV MEM/RANK", "PEAK MEM", 7, false, func(r *Result, _ string) string { return peakMem(r.PeakDeviceBytes) }},
	{"STATUS", "STATUS", 0, false, func(r *Result, _ string) string { return string(r.Status) }},
}

// CompareTableWidth is CompareTable made to fit width columns (0: no
// limit), as on a terminal of that width. A table wider than that uses
// the short headers and leaves out columns until it fits: first those the
// run label already says (plugin, precision, ranks), then the dataset,
// epoch time, best accuracy, epochs, images/s and peak memory, in that
// order; the run, its final accuracy and its status always stay (a table
// that cannot fit even so is printed as it is). A note under the table
// names every column left out, with the value it held where that was the
// same in every row (but for those the run label says), wrapped to the
// width. Errors under the table are cut to the table's width.
func CompareTableWidth(rs []*Result, width int) string {
	var b strings.Builder
	multiSpec := hasSeveralSpecs(rs)
	cols := slices.Clone(compareColumns)
	table := func(short bool) [][]string {
		header := make([]string, len(cols))
		for i, c := range cols {
			if header[i] = c.name; short {
				header[i] = c.short
			}
		}
		rows := [][]string{header}
		for _, r := range rs {
			row := make([]string, len(cols))
			for i, c := range cols {
				row[i] = c.cell(r, runLabel(r, multiSpec))
			}
			rows = append(rows, row)
		}
		return rows
	}
	rows := table(false)
	var left []string // the columns left out that the labels do not say
	if width > 0 && alignedWidth(rows) > width {
		for level := 1; level <= 7 && alignedWidth(table(true)) > width; level++ {
			cols = slices.DeleteFunc(cols, func(c compareColumn) bool {
				if c.drop == level {
					name := strings.ToLower(c.short)
					if c.implied {
						name = strings.ToLower(c.name) // "precision", not "prec"
					} else {
						name += sameValue(rs, c, multiSpec)
					}
					left = append(left, name)
				}
				return c.drop == level
			})
		}
		rows = table(true)
	}
	tw := writeAligned(&b, rows) // the full header alone is over 100 columns
	if len(left) > 0 {
		note := fmt.Sprintf("(left out to fit %d columns: %s)", width, strings.Join(left, ", "))
		b.WriteString(wrapList(note, max(width, tw), "  ") + "\n")
	}
	for _, r := range rs {
		if r.Error != "" {
			b.WriteString(clipLine(runLabel(r, multiSpec)+": "+r.Error, tw) + "\n")
		}
	}
	return b.String()
}

// wrapList breaks s, a list whose items ", " separates, into lines of at
// most width characters where it can, after a separator; every line but
// the first starts with indent.
func wrapList(s string, width int, indent string) string {
	items := strings.SplitAfter(s, ", ")
	var b strings.Builder
	line, empty := "", true
	for _, it := range items {
		if !empty && utf8.RuneCountInString(line+strings.TrimSuffix(it, " ")) > width {
			b.WriteString(strings.TrimSuffix(line, " ") + "\n")
			line = indent
		}
		line, empty = line+it, false
	}
	b.WriteString(line)
	return b.String()
}

// sameValue is " V" when column c holds V in every row, else "": a column
// left out that says one thing says it in the note.
func sameValue(rs []*Result, c compareColumn, multiSpec bool) string {
	v := c.cell(rs[0], runLabel(rs[0], multiSpec))
	for _, r := range rs[1:] {
		if c.cell(r, runLabel(r, multiSpec)) != v {
			return ""
		}
	}
	return " " + v
}

// accCell is an accuracy, "-" before any epoch ended.
func accCell(r *Result, acc float64) string {
	if len(r.EpochResults) == 0 {
		return "-"
	}
	return pct(acc)
}

// epochTimeCell is the mean time of the epochs trained, "-" before one ended.
func epochTimeCell(r *Result, _ string) string {
	if len(r.EpochResults) == 0 {
		return "-"
	}
	var sum float64
	for _, e := range r.EpochResults {
		sum += e.Seconds
	}
	return fmt.Sprintf("%.1fs", sum/float64(len(r.EpochResults)))
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

// columnWidths is the widest cell of every column.
func columnWidths(rows [][]string) []int {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	return width
}

// alignedWidth is the width of the widest line writeAligned writes.
func alignedWidth(rows [][]string) int {
	width := columnWidths(rows)
	total := 2 * (len(width) - 1)
	for _, w := range width {
		total += w
	}
	return total
}

// writeAligned writes rows as left-aligned columns two spaces apart and
// returns the width of the widest line.
func writeAligned(b *strings.Builder, rows [][]string) int {
	width := columnWidths(rows)
	for _, row := range rows {
		line := ""
		for i, c := range row {
			line += c
			if i < len(row)-1 {
				line += strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)+2)
			}
		}
		b.WriteString(line + "\n")
	}
	return alignedWidth(rows)
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
