package model

import (
	"slices"
	"testing"

	"resnetlab/kernels/cpu"
)

func TestStateShapesMatchModel(t *testing.T) {
	for _, cfg := range []Config{{Width: 2, InChannels: 3, NumClasses: 10}, {Width: 3, InChannels: 1, NumClasses: 7}} {
		m := NewResNet18(cpu.New(), cfg)
		sd := m.StateDict()
		m.Free()
		want := StateShapes(cfg)
		if len(sd) != len(want) {
			t.Fatalf("%+v: model has %d entries, StateShapes %d", cfg, len(sd), len(want))
		}
		for i := range sd {
			if sd[i].Name != want[i].Name || !slices.Equal(sd[i].Shape, want[i].Shape) {
				t.Fatalf("%+v entry %d: model %s %v, StateShapes %s %v", cfg, i, sd[i].Name, sd[i].Shape, want[i].Name, want[i].Shape)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{0, 3, 10, 0, 0}, {-1, 3, 10, 0, 0}, {MaxWidth + 1, 3, 10, 0, 0}, {4, 2, 10, 0, 0}, {4, 3, 0, 0, 0}} {
		if c.Validate() == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := (Config{Width: 4, InChannels: 1, NumClasses: 10}).Validate(); err != nil {
		t.Error(err)
	}
}
