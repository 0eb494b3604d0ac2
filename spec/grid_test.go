package spec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func cellIDs(cells []Cell) []string {
	ids := make([]string, len(cells))
	for i, c := range cells {
		ids[i] = c.ID
	}
	return ids
}

func TestCellsReferencePlugins(t *testing.T) {
	s := mustParse(t, `name = "zero"
checkpoint = "./ck/{name}/{plugin}-{precision}-{gpus}"
[grid]
plugin = ["torch_ddp", "torch_ddp_fp16", "low_level_zero", "gemini"]
gpus = [1]
`)
	cells, rej, err := s.Cells()
	if err != nil || len(rej) != 0 {
		t.Fatalf("Cells: %v, rejections %v", err, rej)
	}
	want := []Cell{
		{"torch_ddp", "fp32", 1, "torch_ddp-fp32-1", "./ck/zero/torch_ddp-fp32-1"},
		{"torch_ddp", "fp16", 1, "torch_ddp-fp16-1", "./ck/zero/torch_ddp-fp16-1"},
		{"low_level_zero", "fp16", 1, "low_level_zero-fp16-1", "./ck/zero/low_level_zero-fp16-1"},
		{"gemini", "fp16", 1, "gemini-fp16-1", "./ck/zero/gemini-fp16-1"},
	}
	if !reflect.DeepEqual(cells, want) {
		t.Fatalf("cells\n got %+v\nwant %+v", cells, want)
	}
}

func TestCellsFullProduct(t *testing.T) {
	s := mustParse(t, `checkpoint = "./ck/{plugin}-{precision}-{gpus}"
[grid]
plugin = ["torch_ddp", "torch_ddp_fp16", "low_level_zero", "gemini"]
precision = ["fp32", "fp16", "bf16"]
gpus = [1, 2]
`)
	cells, rej, err := s.Cells()
	if err != nil {
		t.Fatal(err)
	}
	// Enumerated by hand from the rules: torch_ddp takes every precision;
	// torch_ddp_fp16 only fp16, which is torch_ddp x fp16 again; ZeRO and
	// Gemini need a half precision.
	wantIDs := []string{
		"torch_ddp-fp32-1", "torch_ddp-fp32-2", "torch_ddp-fp16-1", "torch_ddp-fp16-2",
		"torch_ddp-bf16-1", "torch_ddp-bf16-2",
		"low_level_zero-fp16-1", "low_level_zero-fp16-2", "low_level_zero-bf16-1", "low_level_zero-bf16-2",
		"gemini-fp16-1", "gemini-fp16-2", "gemini-bf16-1", "gemini-bf16-2",
	}
	if got := cellIDs(cells); !reflect.DeepEqual(got, wantIDs) {
		t.Fatalf("ids\n got %v\nwant %v", got, wantIDs)
	}
	type rk struct {
		plugin, prec string
		gpus         int
		frag         string
	}
	wantRej := []rk{
		{"torch_ddp_fp16", "fp32", 1, "cannot train in fp32"}, {"torch_ddp_fp16", "fp32", 2, "cannot train in fp32"},
		{"torch_ddp_fp16", "fp16", 1, "same run as torch_ddp-fp16-1"}, {"torch_ddp_fp16", "fp16", 2, "same run as torch_ddp-fp16-2"},
		{"torch_ddp_fp16", "bf16", 1, "cannot train in bf16"}, {"torch_ddp_fp16", "bf16", 2, "cannot train in bf16"},
		{"low_level_zero", "fp32", 1, "half precision"}, {"low_level_zero", "fp32", 2, "half precision"},
		{"gemini", "fp32", 1, "half precision"}, {"gemini", "fp32", 2, "half precision"},
	}
	if len(rej) != len(wantRej) {
		t.Fatalf("got %d rejections, want %d: %v", len(rej), len(wantRej), rej)
	}
	for i, w := range wantRej {
		r := rej[i]
		if r.Cell.Plugin != w.plugin || r.Cell.Precision != w.prec || r.Cell.WorldSize != w.gpus ||
			!strings.Contains(r.Reason, w.frag) || r.Where != "t.toml:2" {
			t.Errorf("rejection %d = %+v, want %+v at t.toml:2", i, r, w)
		}
	}
	if s := rej[2].String(); !strings.Contains(s, "t.toml:2: skipping torch_ddp_fp16 x fp16 x 1: same run") {
		t.Errorf("Rejection.String() = %q", s)
	}
}

func TestCellsRunsAndGrid(t *testing.T) {
	s := mustParse(t, `interval = 0
[grid]
plugin = ["gemini"]
[[run]]
plugin = "torch_ddp"
gpus = 2
[[run]]
plugin = "gemini"
precision = "fp16"
[[run]]
plugin = "low_level_zero"
precision = "bf16"
gpus = 3
`)
	cells, rej, err := s.Cells()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cellIDs(cells), []string{"gemini-fp16-1", "torch_ddp-fp32-2", "low_level_zero-bf16-3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	if len(rej) != 1 || rej[0].Where != "t.toml:7" || !strings.Contains(rej[0].Reason, "listed twice") {
		t.Fatalf("want the second gemini run merged, reported at its [[run]] line: %+v", rej)
	}
	// Without interval and resume the runs may share the default directory.
	if cells[0].CheckpointDir != "./checkpoint" {
		t.Fatalf("checkpoint dir %q", cells[0].CheckpointDir)
	}
}

func TestCellsOnlyRunsAndDefault(t *testing.T) {
	s := mustParse(t, "[[run]]\nplugin = \"torch_ddp_fp16\"\n")
	cells, _, err := s.Cells()
	if err != nil || !reflect.DeepEqual(cellIDs(cells), []string{"torch_ddp-fp16-1"}) {
		t.Fatalf("runs only: %v %v", cellIDs(cells), err)
	}
	s = mustParse(t, "")
	cells, _, err = s.Cells()
	if err != nil || !reflect.DeepEqual(cellIDs(cells), []string{"torch_ddp-fp32-1"}) {
		t.Fatalf("no grid: %v %v", cellIDs(cells), err)
	}
}

func TestCellsSharedCheckpointDir(t *testing.T) {
	src := "\n[grid]\nplugin = [\"torch_ddp\", \"gemini\"]\n"
	_, _, err := mustParse(t, src).Cells() // interval 5 by default
	var se *Error
	if !errors.As(err, &se) || se.Key != "checkpoint" ||
		!strings.Contains(err.Error(), "runs torch_ddp-fp32-1 and gemini-fp16-1 would share checkpoint directory") {
		t.Fatalf("want a shared-directory error, got %v", err)
	}
	if _, _, err := mustParse(t, "interval = 0"+src).Cells(); err != nil {
		t.Fatalf("interval 0 and no resume: sharing is harmless, got %v", err)
	}
	if _, _, err := mustParse(t, "checkpoint = \"c/{plugin}\""+src).Cells(); err != nil {
		t.Fatalf("distinct dirs: %v", err)
	}
}

func TestCellsAllRejected(t *testing.T) {
	s := mustParse(t, "[grid]\nplugin = [\"gemini\"]\nprecision = [\"fp32\"]\n")
	cells, rej, err := s.Cells()
	if err == nil || cells != nil || len(rej) != 1 || !strings.Contains(err.Error(), "t.toml: no valid runs") {
		t.Fatalf("got %v %v %v", cells, rej, err)
	}
}

func TestCellsTooManyRanksForData(t *testing.T) {
	s := mustParse(t, `dataset = "synthetic"
interval = 0
[synthetic]
train = 1000
[grid]
gpus = [1, 10, 11]
`)
	cells, rej, err := s.Cells()
	if err != nil || !reflect.DeepEqual(cellIDs(cells), []string{"torch_ddp-fp32-1", "torch_ddp-fp32-10"}) {
		t.Fatalf("cells %v err %v", cellIDs(cells), err)
	}
	if len(rej) != 1 || !strings.Contains(rej[0].Reason, "each of 11 ranks gets 90 training images") {
		t.Fatalf("rejections %+v", rej)
	}
}

func TestCheckDevices(t *testing.T) {
	src := "interval = 0\nshare_devices = false\n[grid]\ngpus = [1, 2]\n"
	s := mustParse(t, src)
	err := s.CheckDevices(1)
	if err == nil || !strings.HasPrefix(err.Error(), "t.toml:2: key `share_devices`: run torch_ddp-fp32-2 needs 2 devices but 1 are available") {
		t.Fatalf("CheckDevices(1) = %v", err)
	}
	if err := s.CheckDevices(2); err != nil {
		t.Fatalf("CheckDevices(2) = %v", err)
	}
	if err := s.CheckDevices(0); err == nil {
		t.Fatal("CheckDevices(0) must fail")
	}
	shared := mustParse(t, "interval = 0\n[grid]\ngpus = [1, 8]\n")
	if err := shared.CheckDevices(1); err != nil {
		t.Fatalf("share_devices = true: %v", err)
	}
}

func TestCheckTemplateAndExpand(t *testing.T) {
	s := &Spec{Name: "exp", Checkpoint: "./{name}/{plugin}_{precision}_x{gpus}/{plugin}"}
	got := s.ExpandCheckpoint(Cell{Plugin: "gemini", Precision: "bf16", WorldSize: 4})
	if got != "./exp/gemini_bf16_x4/gemini" {
		t.Fatalf("ExpandCheckpoint = %q", got)
	}
	for tmpl, ok := range map[string]bool{"./c": true, "{gpus}": true, "a}b": false, "{": false, "{}": false, "": false} {
		if msg := checkTemplate(tmpl); (msg == "") != ok {
			t.Errorf("checkTemplate(%q) = %q, want ok=%v", tmpl, msg, ok)
		}
	}
}

// A name or directory too long for a file name is refused before any run
// starts, naming the key, not when the result is written after training.
func TestCellsPathTooLong(t *testing.T) {
	long := strings.Repeat("n", 300)
	for _, c := range []struct{ src, key string }{
		{"name = \"" + long + "\"\n", "name"},
		{"checkpoint = \"ck/" + long + "-{plugin}-{precision}-{gpus}\"\n", "checkpoint"},
		{"results_dir = \"r/" + long + "\"\n", "results_dir"},
	} {
		_, _, err := mustParse(t, c.src).Cells()
		var se *Error
		if !errors.As(err, &se) || se.Key != c.key || !strings.Contains(err.Error(), "over the 255") {
			t.Errorf("%.30s...: got %v, want an error on key %s", c.src, err, c.key)
		}
	}
	if _, _, err := mustParse(t, "name = \""+long[:200]+"\"\n").Cells(); err != nil {
		t.Errorf("a 200-byte name: %v", err)
	}
}
