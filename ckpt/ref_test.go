package ckpt

import (
	"strings"
	"testing"
)

func TestParseCheckpointRef(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Ref
	}{{"3", Ref{Epoch: 3}}, {"3@120", Ref{Epoch: 3, Step: 120}}, {" 1@1 ", Ref{Epoch: 1, Step: 1}}} {
		got, err := ParseRef(c.in)
		if err != nil || got != c.want || (got.String() != strings.TrimSpace(c.in)) {
			t.Errorf("%q: %v %v (String %q)", c.in, got, err, got.String())
		}
	}
	for _, in := range []string{"", "0", "-1", "x", "3@", "3@0", "3@-2", "@4", "3@4@5", "3.5"} {
		if r, err := ParseRef(in); err == nil {
			t.Errorf("%q accepted as %v", in, r)
		}
	}
}

func TestRefOfModelFile(t *testing.T) {
	for name, want := range map[string]Ref{
		"model_1.pth": {Epoch: 1}, "model_12-step7.pth": {Epoch: 12, Step: 7},
	} {
		if got, ok := refOfModelFile(name); !ok || got != want {
			t.Errorf("%s: %v %v", name, got, ok)
		}
		if _, _, sp := want.Paths(""); !strings.HasPrefix(sp, "lr_scheduler_") {
			t.Errorf("%v: scheduler file %s", want, sp)
		}
		if mp, _, _ := want.Paths(""); mp != name {
			t.Errorf("%v: model file %s, want %s", want, mp, name)
		}
	}
	for _, name := range []string{"model_05.pth", "model_1-step0.pth", "model_1-step07.pth", "model_1-step.pth", "model_x.pth", "optimizer_1.pth"} {
		if r, ok := refOfModelFile(name); ok {
			t.Errorf("%s read as %v", name, r)
		}
	}
}
