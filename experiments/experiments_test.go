package experiments

import (
	"path/filepath"
	"reflect"
	"testing"

	"resnetlab/spec"
)

func TestEverySpecValidates(t *testing.T) {
	files, err := filepath.Glob("*.toml")
	if err != nil || len(files) < 3 {
		t.Fatalf("found %v (%v)", files, err)
	}
	for _, f := range files {
		s, err := spec.Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		cells, rejected, err := s.Cells()
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
		for _, r := range rejected {
			t.Errorf("shipped specs must have no rejected cells: %s", r)
		}
		if len(cells) == 0 {
			t.Errorf("%s: no runs", f)
		}
		if s.Name+".toml" != f {
			t.Errorf("%s: name %q should match the file name", f, s.Name)
		}
	}
}

func cellKeys(cells []spec.Cell) []string {
	var out []string
	for _, c := range cells {
		out = append(out, c.ID)
	}
	return out
}

// The four runs of ColossalAI's ResNet example, with its recipe.
var referenceRuns = []string{"torch_ddp-fp32-1", "torch_ddp-fp16-1", "low_level_zero-fp16-1", "gemini-fp16-1"}

func TestZeroIsTheReference(t *testing.T) {
	s, err := spec.Load("zero.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Dataset != "cifar10" || s.Epochs != 80 || s.BatchSize != 100 || s.Interval != 5 ||
		s.TargetAcc != 0.84 || s.LR != 1e-3 || s.Gamma != 1.0/3 || s.InChannels != 3 || s.Width != 64 ||
		!reflect.DeepEqual(s.Milestones, []int{20, 40, 60, 80}) || s.Zero.Stage != 1 {
		t.Fatalf("zero.toml strays from the reference recipe: %+v", s)
	}
	cells, _, _ := s.Cells()
	if got := cellKeys(cells); !reflect.DeepEqual(got, referenceRuns) {
		t.Fatalf("runs %v, want %v", got, referenceRuns)
	}
	for _, p := range []string{spec.PluginLowLevelZero, spec.PluginGemini} {
		if s.LossScale(p).InitialScale != 32 {
			t.Errorf("%s must start its loss scale at 2^5 like the example", p)
		}
	}
}

func TestFmnistAndSmoke(t *testing.T) {
	f, err := spec.Load("fmnist.toml")
	if err != nil {
		t.Fatal(err)
	}
	cells, _, _ := f.Cells()
	if f.Dataset != "fashion-mnist" || f.Epochs != 12 || !reflect.DeepEqual(cellKeys(cells), referenceRuns) {
		t.Fatalf("fmnist.toml: %+v %v", f, cellKeys(cells))
	}
	s, err := spec.Load("smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Dataset != "synthetic" || s.TargetAcc < 0.6 || s.Synthetic.Train > 10000 || s.Width > 32 {
		t.Fatalf("smoke.toml must stay small and gated at >= 0.6: %+v", s)
	}
}
