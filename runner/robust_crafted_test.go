package runner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"resnetlab/ckpt"
	"resnetlab/model/torchfmt"
)

// A crafted model_1.pth (a real width-2 checkpoint whose metadata is then
// rewritten) is refused by eval, export and resume with one line naming
// the file, the key and the value: no panic, no model the file cannot
// justify, nothing read from the data loader.
func TestCraftedCheckpointMetadataRefused(t *testing.T) {
	src := t.TempDir()
	writeTestCheckpoint(t, src, 1, testStateDict(t, 2, 1), syntheticMeta(2))
	for _, c := range []struct {
		key  string
		val  any
		want string
	}{
		{"width", 0, `metadata "width" = 0 (want 1..4096)`},
		{"width", -3, `metadata "width" = -3 (want 1..4096)`},
		{"width", 1e12, `metadata "width" = 1000000000000 (want 1..4096)`},
		{"width", "wide", `metadata "width" = wide (want an integer)`},
		{"in_channels", 0, `metadata "in_channels" = 0 (want 1 or 3)`},
		{"in_channels", 2, `metadata "in_channels" = 2 (want 1 or 3)`},
		{"num_classes", 0, `metadata "num_classes" = 0 (want 1..1048576)`},
		{"num_classes", -1, `metadata "num_classes" = -1 (want 1..1048576)`},
		{"num_classes", 1e15, `metadata "num_classes" = 1000000000000000 (want 1..1048576)`},
		{"num_classes", 7, `metadata "num_classes" = 7 (want 10, the class count of a data set)`},
		{"step", -1, `metadata "step" = -1 (want 0..6, the steps_per_epoch)`},
		{"step", 7, `metadata "step" = 7 (want 0..6, the steps_per_epoch)`},
		{"steps_per_epoch", -2, `metadata "steps_per_epoch" = -2 (want 0..10000000)`},
		{"epoch", 0, `metadata "epoch" = 0 (want 1..100000)`},
		{"synthetic_test", 1e12, `metadata "synthetic_test" = 1000000000000 (want 0..10000000)`},
		// In bounds but not the file's tensors: refused before a model is built.
		{"width", 4096, `key "conv1.weight" has shape [2 3 7 7], want [4096 3 7 7] for width 4096`},
		{"num_classes", 10.0, ""}, // unchanged: loads
	} {
		dir := t.TempDir()
		copyDir(t, src, dir)
		mp, _, _ := ckpt.Paths(dir, 1)
		setMeta(t, mp, "model", c.key, c.val)
		prefix := "checkpoint " + mp + ": "
		check := func(what string, err error) {
			t.Helper()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s %s=%v: %v", what, c.key, c.val, err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%s %s=%v:\n got  %v\n want %s...%s", what, c.key, c.val, err, prefix, c.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("%s %s=%v: not one line: %q", what, c.key, c.val, err)
			}
		}
		_, _, err := Eval(context.Background(), EvalOptions{CheckpointDir: dir, Epoch: 1, Device: "cpu"})
		check("eval", err)
		check("export", ExportModel(dir, 1, "", filepath.Join(t.TempDir(), "m.safetensors")))
		_, err = ckpt.Load(dir, ckpt.Ref{Epoch: 1})
		check("resume", err)
	}
}

// Tensors that disagree with each other or with the metadata are refused.
func TestCraftedCheckpointTensorsRefused(t *testing.T) {
	dir := t.TempDir()
	writeTestCheckpoint(t, dir, 1, testStateDict(t, 2, 1), syntheticMeta(2))
	_, op, _ := ckpt.Paths(dir, 1)
	meta, ts, err := ckpt.ReadFile(op, "optimizer")
	if err != nil {
		t.Fatal(err)
	}
	for i := range ts {
		if ts[i].Name == "state.0.exp_avg" {
			ts[i].Shape, ts[i].F32 = []int{3}, ts[i].F32[:3]
		}
	}
	if err := ckpt.WriteFile(op, "optimizer", meta, ts); err != nil {
		t.Fatal(err)
	}
	_, err = ckpt.Load(dir, ckpt.Ref{Epoch: 1})
	want := "checkpoint " + op + `: tensor "state.0.exp_avg" has 3 values and "state.0.exp_avg_sq" 294, want 294`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// An import whose conv1/fc shapes imply a model beyond the bounds is
// refused from the shapes alone.
func TestCraftedImportRefused(t *testing.T) {
	reshape := func(key string, shape []int) func([]torchfmt.Tensor) []torchfmt.Tensor {
		return func(ts []torchfmt.Tensor) []torchfmt.Tensor {
			for i := range ts {
				if ts[i].Name == key {
					n := 1
					for _, d := range shape {
						n *= d
					}
					ts[i].Shape, ts[i].F32 = shape, make([]float32, n)
				}
			}
			return ts
		}
	}
	for _, c := range []struct {
		key   string
		shape []int
		want  string
	}{
		{"conv1.weight", []int{5000, 3, 7, 7}, "conv1.weight [5000 3 7 7] and fc.weight [10 16] imply width 5000, want 1..4096"},
		{"conv1.weight", []int{2, 2, 7, 7}, "conv1.weight [2 2 7 7] and fc.weight [10 16] imply in_channels 2, want 1 or 3"},
		{"fc.weight", []int{1000, 16}, "fc.weight [1000 16] has 1000 outputs; the data sets have 10 classes"},
		{"conv1.weight", []int{64, 3, 7, 7}, `key "bn1.weight" has shape [2], want [64] for width 64`},
	} {
		in := writeTorch(t, "crafted.pth", reshape(c.key, c.shape))
		err := ImportModel(in, t.TempDir(), 1, ImportOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), in+": ") {
			t.Errorf("%s %v:\n got  %v\n want %s: ...%s", c.key, c.shape, err, in, c.want)
		}
	}
}
