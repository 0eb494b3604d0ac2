package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func sampleResult() *Result {
	return &Result{
		Run: "gemini-fp16-2", Spec: "zero", Plugin: "gemini", Precision: "fp16", WorldSize: 2,
		Dataset: "cifar10", Backend: "cuda", Devices: []string{"cuda:0", "cuda:0"}, Width: 64,
		BatchSize: 100, Epochs: 80,
		EpochResults: []EpochResult{{1, 1.9, 0.41, 10.5}, {2, 1.4, 0.55, 9.5}},
		FinalTestAcc: 0.55, BestTestAcc: 0.55, PerClassAcc: []float64{0.5, 0.6},
		TrainSeconds: 20, ImagesPerSecond: 5000, PeakDeviceBytes: []int64{3 << 29, 1 << 30},
		PeakHostBytes: []int64{1 << 20, 1 << 20}, ModelSHA256: "ab", Status: "stopped",
	}
}

func TestFiniteJSONMatchesEncodingJSON(t *testing.T) {
	for _, r := range []*Result{sampleResult(), {Run: "x", Error: "boom"}, {}} {
		want, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.MarshalIndent(finiteJSON(r), "", "  ")
		if err != nil || string(got) != string(want) {
			t.Fatalf("finiteJSON differs (%v)\n got %s\nwant %s", err, got, want)
		}
	}
}

func TestWriteReadResult(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	r := sampleResult()
	if err := WriteResult(dir, r); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "zero-gemini-fp16-2.json")
	if ResultPath(dir, r) != path {
		t.Fatalf("ResultPath = %s", ResultPath(dir, r))
	}
	raw, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(raw), "{\n  \"run\": \"gemini-fp16-2\",\n") || !strings.HasSuffix(string(raw), "}\n") {
		t.Fatalf("not indented JSON:\n%s", raw)
	}
	got, err := ReadResults([]string{path})
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], r) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, r)
	}
}

func TestWriteResultNonFinite(t *testing.T) {
	dir := t.TempDir()
	r := &Result{Run: "torch_ddp-fp16-1", Status: "failed", Error: "loss is NaN",
		EpochResults:    []EpochResult{{Epoch: 1, Loss: math.NaN(), TestAcc: 0.1}},
		ImagesPerSecond: math.Inf(1)}
	if err := WriteResult(dir, r); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "torch_ddp-fp16-1.json"))
	if !strings.Contains(string(raw), `"loss": null`) || !strings.Contains(string(raw), `"images_per_second": null`) {
		t.Fatalf("non-finite values not written as null:\n%s", raw)
	}
	got, err := ReadResults([]string{filepath.Join(dir, "torch_ddp-fp16-1.json")})
	if err != nil || got[0].EpochResults[0].TestAcc != 0.1 || got[0].Error != "loss is NaN" {
		t.Fatalf("read back: %v %+v", err, got)
	}
	if err := WriteResult(dir, &Result{}); err == nil {
		t.Fatal("a result without run id must be refused")
	}
}

func TestReadResultsErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	WriteResult(dir, &Result{Run: "good", Status: StatusDone})
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o644)
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"name": "package.json"}`), 0o644)
	bare := filepath.Join(dir, "bare.json")
	os.WriteFile(bare, []byte(`{"run": "x"}`), 0o644)
	odd := filepath.Join(dir, "odd.json")
	os.WriteFile(odd, []byte(`{"run": "x", "status": "bogus"}`), 0o644)
	missing := filepath.Join(dir, "missing.json")
	rs, err := ReadResults([]string{bad, good, other, bare, odd, missing})
	if len(rs) != 1 || rs[0].Run != "good" {
		t.Fatalf("want the one good result, got %v", rs)
	}
	msg := err.Error()
	for _, want := range []string{"result " + bad + ": not a result file", "result " + other + `: no "run" field`,
		"result " + bare + `: no "status" field`, "result " + odd + ": key `status`: \"bogus\" (want \"done\", \"failed\", \"stopped\" or \"interrupted\")",
		"result " + missing} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("missing file error must match fs.ErrNotExist")
	}
}

// A file that is not a result says so in one line naming the file and,
// in JSON's terms, what is wrong: the key whose value has the wrong type,
// the byte where it stops being JSON; not encoding/json's Go names.
func TestReadResultsSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, want string }{
		{`{"run": 5}`, "key `run`: got a number (want a string)"},
		{`{"run": "x", "world_size": "2"}`, "key `world_size`: got a string (want a number)"},
		{`{"run": "x", "per_epoch": [{"epoch": 1.5}]}`, "key `per_epoch.epoch`: got 1.5 (want a whole number)"},
		{`{"run": "x", "world_size": 1e40}`, "key `world_size`: got 1e40 (out of range)"},
		{`{"run": "x", "devices": {}}`, "key `devices`: got an object (want an array)"},
		{`{"run": ["x"]}`, "key `run`: got an array (want a string)"},
		{`{"run": "x", "spec": true}`, "key `spec`: got a bool (want a string)"},
		{`{"run": "x", "per_epoch": 3}`, "key `per_epoch`: got a number (want an array)"},
		{`[1, 2]`, "the file: got an array (want an object)"},
		{"\x89PNG\r\n\x1a\n\x00\x00", "not a result file: not JSON at byte 1 (unexpected byte 0x89)"},
		{`{"run": "x"} trailing`, "not a result file: not JSON at byte 14 (unexpected 't')"},
		{`{"run": "x",}`, "not a result file: not JSON at byte 13 (unexpected '}')"},
		{`{"run": "x"`, "not a result file: not JSON: it ends at byte 11 inside a value (cut short?)"},
		{`{"run": "x", "spec": nul`, "not a result file: not JSON: it ends at byte 24 inside a value (cut short?)"},
		{" \n", "not a result file: empty"},
	} {
		path := filepath.Join(dir, "r.json")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadResults([]string{path})
		if want := "result " + path + ": " + tc.want; err == nil || err.Error() != want {
			t.Errorf("%q: error %v\nwant %s", tc.content, err, want)
		}
	}
}

func TestCompareTable(t *testing.T) {
	a := sampleResult()
	b := &Result{Run: "torch_ddp-fp32-1", Spec: "zero", Plugin: "torch_ddp", Precision: "fp32", WorldSize: 1,
		Dataset: "cifar10", Epochs: 80, Status: "failed", Error: "final accuracy 0.8312 is below target_acc 0.84",
		EpochResults: []EpochResult{{1, 2, 0.8312, 60}}, FinalTestAcc: 0.8312, BestTestAcc: 0.8312,
		ImagesPerSecond: 833.4}
	got := CompareTable([]*Result{a, b})
	want := "" +
		"RUN               PLUGIN     PRECISION  RANKS  DATASET  EPOCHS  FINAL ACC  BEST ACC  EPOCH TIME  IMAGES/S  PEAK DEV MEM/RANK  STATUS\n" +
		"gemini-fp16-2     gemini     fp16       2      cifar10  2/80    55.00%     55.00%    10.0s       5000      1.50 GiB           stopped\n" +
		"torch_ddp-fp32-1  torch_ddp  fp32       1      cifar10  1/80    83.12%     83.12%    60.0s       833       -                  failed\n" +
		"torch_ddp-fp32-1: final accuracy 0.8312 is below target_acc 0.84\n"
	if got != want {
		t.Fatalf("table\n%s\nwant\n%s", got, want)
	}
	b.Spec = "fmnist"
	if got := CompareTable([]*Result{a, b}); !strings.Contains(got, "zero/gemini-fp16-2 ") ||
		!strings.Contains(got, "fmnist/torch_ddp-fp32-1 ") {
		t.Fatalf("runs of several specs must be labelled spec/run:\n%s", got)
	}
	if got := CompareTable([]*Result{{Run: "r", Epochs: 3}}); !strings.Contains(got, "r    ") ||
		!strings.Contains(got, "0/3     -          -") {
		t.Fatalf("a run without epochs:\n%s", got)
	}
}

// A failed run's error of many lines and thousands of characters is shown
// under the table on one line no wider than the table, cut with an
// ellipsis; the result file keeps every character.
func TestCompareTableClipsLongErrors(t *testing.T) {
	var long strings.Builder
	for i := range 200 {
		fmt.Fprintf(&long, "rank %d: collective aborted: rank 3 ran out of device memory\n\t", i)
	}
	failed := &Result{Run: "torch_ddp-fp32-8", Plugin: "torch_ddp", Precision: "fp32", WorldSize: 8,
		Dataset: "cifar10", Epochs: 80, Status: "failed", Error: long.String()}
	short := &Result{Run: "gemini-fp16-1", Status: "failed", Error: "loss is NaN"}
	got := CompareTable([]*Result{sampleResult(), failed, short})
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want a header, 3 rows and 2 errors:\n%s", len(lines), got)
	}
	tableWidth := 0
	for _, l := range lines[:4] {
		tableWidth = max(tableWidth, len(l))
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("line of %d characters, the table is %d wide: %q", n, tableWidth, l)
		}
	}
	clipped := lines[4]
	if utf8.RuneCountInString(clipped) != tableWidth || !strings.HasSuffix(clipped, "…") ||
		!strings.HasPrefix(clipped, "torch_ddp-fp32-8: rank 0: collective aborted: rank 3 ran out of device memory rank 1: ") {
		t.Errorf("clipped error line %q", clipped)
	}
	if lines[5] != "gemini-fp16-1: loss is NaN" {
		t.Errorf("a short error changed: %q", lines[5])
	}
	dir := t.TempDir()
	if err := WriteResult(dir, failed); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResults([]string{ResultPath(dir, failed)})
	if err != nil || back[0].Error != long.String() {
		t.Fatalf("the result file lost the full error: %v", err)
	}
}

// Errors are cut by characters, not bytes, after joining their lines.
func TestClipLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		w    int
		want string
	}{
		{"a\n\tb  c", 10, "a b c"},
		{"abcdef", 6, "abcdef"},
		{"abcdefg", 6, "abcde…"},
		{"ab\ncdefg", 6, "ab cd…"},
		{strings.Repeat("é", 9), 5, "éééé…"},
	} {
		if got := clipLine(c.in, c.w); got != c.want {
			t.Errorf("clipLine(%q, %d) = %q, want %q", c.in, c.w, got, c.want)
		}
	}
}

// smokeResults are the four runs of experiments/smoke.toml as they end.
func smokeResults(last Status) []*Result {
	var rs []*Result
	for i, id := range []string{"torch_ddp-fp32-1", "torch_ddp-fp16-1", "low_level_zero-fp16-1", "gemini-fp16-1"} {
		parts := strings.Split(id, "-")
		rs = append(rs, &Result{Run: id, Spec: "smoke", Plugin: parts[0], Precision: parts[1], WorldSize: 1,
			Dataset: "synthetic", Epochs: 6, Status: StatusDone,
			EpochResults: []EpochResult{{1, 2, 0.5, 2.25}, {2, 1.5, 0.8240, 2.5}}, FinalTestAcc: 0.824, BestTestAcc: 0.824,
			ImagesPerSecond: 1219 + float64(i), PeakDeviceBytes: []int64{28217221}})
	}
	rs[3].Status = last
	return rs
}

// On a terminal of 80 columns the compare table fits: short headers, the
// columns the run label says (plugin, precision, ranks) left out, then
// the least useful ones, named under the table; the run, final accuracy
// and status always stay. Without a width, or where the whole table fits,
// it is CompareTable's.
func TestCompareTableWidthFits(t *testing.T) {
	done := smokeResults(StatusDone)
	got := CompareTableWidth(done, 80)
	want := "" +
		"RUN                    EPOCHS  FINAL   BEST    S/EPOCH  IMG/S  PEAK MEM   STATUS\n" +
		"torch_ddp-fp32-1       2/6     82.40%  82.40%  2.4s     1219   26.91 MiB  done\n" +
		"torch_ddp-fp16-1       2/6     82.40%  82.40%  2.4s     1220   26.91 MiB  done\n" +
		"low_level_zero-fp16-1  2/6     82.40%  82.40%  2.4s     1221   26.91 MiB  done\n" +
		"gemini-fp16-1          2/6     82.40%  82.40%  2.4s     1222   26.91 MiB  done\n" +
		"(left out to fit 80 columns: plugin, precision, ranks, dataset synthetic)\n"
	if got != want {
		t.Fatalf("80 columns:\n%s\nwant\n%s", got, want)
	}
	// "interrupted" is wider than "done": the epoch time goes too, and
	// the note, too long for 80 columns, goes on over two lines.
	got = CompareTableWidth(smokeResults(StatusInterrupted), 80)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if lines[0] != "RUN                    EPOCHS  FINAL   BEST    IMG/S  PEAK MEM   STATUS" ||
		lines[len(lines)-2] != "(left out to fit 80 columns: plugin, precision, ranks, dataset synthetic," ||
		lines[len(lines)-1] != "  s/epoch 2.4s)" {
		t.Errorf("80 columns, one run interrupted:\n%s", got)
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	if got := CompareTableWidth(done, 0); got != CompareTable(done) {
		t.Errorf("width 0 changed the table:\n%s", got)
	}
	if got := CompareTableWidth(done, 200); got != CompareTable(done) {
		t.Errorf("a table that fits 200 columns changed:\n%s", got)
	}
	// Too narrow for anything but the three kept columns: those, as they
	// are, and the note wrapped to the table's width.
	got = CompareTableWidth(done, 20)
	if lines := strings.Split(got, "\n"); lines[0] != "RUN                    FINAL   STATUS" ||
		lines[1] != "torch_ddp-fp32-1       82.40%  done" ||
		!strings.HasSuffix(got, "\n(left out to fit 20 columns: plugin,\n  precision, ranks,\n  dataset synthetic, s/epoch 2.4s,\n"+
			"  best 82.40%, epochs 2/6, img/s,\n  peak mem 26.91 MiB)\n") {
		t.Errorf("20 columns:\n%s", got)
	}
}

// At 80 columns a grid of several runs (plugins x precisions x ranks, one
// of them interrupted) loses the plugin, precision and ranks columns,
// among others: the note under the table names every column that the
// full table has and the narrowed one does not, and no line is wider
// than 80 columns.
func TestCompareTableWidthNamesEveryColumnLeftOut(t *testing.T) {
	var rs []*Result
	for _, plugin := range []string{"torch_ddp", "low_level_zero", "gemini"} {
		for _, prec := range []string{"fp32", "fp16", "bf16"} {
			for _, ranks := range []int{1, 2} {
				rs = append(rs, &Result{Run: fmt.Sprintf("%s-%s-%d", plugin, prec, ranks), Spec: "grid",
					Plugin: plugin, Precision: prec, WorldSize: ranks, Dataset: "synthetic", Epochs: 6, Status: StatusDone,
					EpochResults: []EpochResult{{1, 2, 0.5, 2.25}, {2, 1.5, 0.8240, 2.5 + float64(ranks)}},
					FinalTestAcc: 0.824, BestTestAcc: 0.824, ImagesPerSecond: 1219, PeakDeviceBytes: []int64{28217221}})
			}
		}
	}
	rs[len(rs)-1].Status = StatusInterrupted
	got := CompareTableWidth(rs, 80)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	noteAt := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "(left out to fit 80 columns: ") })
	if noteAt < 0 {
		t.Fatalf("no note of the columns left out:\n%s", got)
	}
	note := strings.Join(lines[noteAt:], " ")
	const want = "(left out to fit 80 columns: plugin, precision, ranks, dataset synthetic,   s/epoch)"
	if note != want {
		t.Errorf("note %q, want %q", note, want)
	}
	full := regexp.MustCompile(`\s{2,}`).Split(strings.SplitN(CompareTable(rs), "\n", 2)[0], -1)
	shown := regexp.MustCompile(`\s{2,}`).Split(lines[0], -1)
	for i, c := range compareColumns {
		if full[i] != c.name {
			t.Fatalf("full header %q, want %q", full, c.name)
		}
		if slices.Contains(shown, c.short) {
			continue
		}
		name := strings.ToLower(c.short)
		if c.implied {
			name = strings.ToLower(c.name)
		}
		if !regexp.MustCompile(`[:,] +` + regexp.QuoteMeta(name) + `[ ,)]`).MatchString(note) {
			t.Errorf("column %s left out but not named in the note %q", c.name, note)
		}
	}
	if len(shown) >= len(full) || !slices.Contains(shown, "RUN") || !slices.Contains(shown, "FINAL") || !slices.Contains(shown, "STATUS") {
		t.Errorf("narrowed header %q", shown)
	}
}
