package gemini

import (
	"fmt"
	"strings"
	"testing"
)

// spec lists docs/design.md's transitions independently of the implementation.
var spec = []string{
	"FREE->HOLD", "FREE->COMPUTE", "HOLD->FREE", "HOLD->COMPUTE", "COMPUTE->HOLD",
	"COMPUTE->HOLD_AFTER_BWD", "COMPUTE->READY_FOR_REDUCE", "HOLD_AFTER_BWD->COMPUTE",
	"HOLD_AFTER_BWD->READY_FOR_REDUCE", "READY_FOR_REDUCE->HOLD",
}

func TestLegalIsExactlySpec(t *testing.T) {
	want := map[string]bool{}
	for _, s := range spec {
		want[s] = true
	}
	for a := TensorState(0); a < numStates; a++ {
		for b := TensorState(0); b < numStates; b++ {
			name := a.String() + "->" + b.String()
			if Legal(a, b) != want[name] {
				t.Errorf("Legal(%s) = %v, docs/design.md says %v", name, Legal(a, b), want[name])
			}
		}
	}
}

func TestWalkEveryLegalTransition(t *testing.T) {
	var got []string
	g := &Gemini{cfg: Config{OnEvent: func(e any) {
		if sc, ok := e.(StateChange); ok {
			got = append(got, fmt.Sprintf("%s:%s->%s", sc.Tensor, sc.From, sc.To))
		}
	}}}
	ti := &tensorInfo{name: "w", c: &chunk{id: 3}}
	// One walk from FREE through every legal edge (an Eulerian-style tour).
	path := []TensorState{Hold, Free, Compute, Hold, Compute, HoldAfterBwd, Compute,
		ReadyForReduce, Hold, Compute, HoldAfterBwd, ReadyForReduce, Hold, Free, Hold}
	for _, s := range path {
		g.transition(ti, s)
	}
	seen := map[string]bool{}
	prev := Free
	for _, s := range path {
		seen[prev.String()+"->"+s.String()] = true
		prev = s
	}
	for _, s := range spec {
		if !seen[s] {
			t.Errorf("the walk misses %s", s)
		}
	}
	if len(got) != len(path) || got[0] != "w:FREE->HOLD" || got[len(got)-1] != "w:FREE->HOLD" {
		t.Fatalf("state change events %v", got)
	}
}

func TestIllegalTransitionPanics(t *testing.T) {
	for _, c := range [][2]TensorState{{Free, ReadyForReduce}, {Hold, HoldAfterBwd}, {ReadyForReduce, Free}, {Compute, Free}} {
		ti := &tensorInfo{name: "layer1.0.conv1.weight", c: &chunk{id: 0}, state: c[0]}
		func() {
			defer func() {
				msg := fmt.Sprint(recover())
				for _, want := range []string{c[0].String(), c[1].String(), "layer1.0.conv1.weight"} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s->%s: panic %q does not name %s", c[0], c[1], msg, want)
					}
				}
			}()
			(*Gemini)(nil).transition(ti, c[1])
			t.Errorf("%s->%s did not panic", c[0], c[1])
		}()
		if ti.state != c[0] {
			t.Errorf("an illegal transition changed the state to %s", ti.state)
		}
	}
}
