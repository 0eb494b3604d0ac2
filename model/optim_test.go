package model

import (
	"math"
	"strings"
	"testing"

	"resnetlab/kernels"
)

// hostAdam is the HybridAdam (adamw_mode) update in float64, written from
// the formula: g *= scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + lr*wd*p.
type hostAdam struct{ p, m, v []float64 }

func (h *hostAdam) step(g []float32, t int, lr, scale, wd float64) {
	b1, b2, eps := 0.9, 0.999, 1e-8
	for i := range h.p {
		gi := float64(g[i]) * scale
		h.m[i] = b1*h.m[i] + (1-b1)*gi
		h.v[i] = b2*h.v[i] + (1-b2)*gi*gi
		mh := h.m[i] / (1 - math.Pow(b1, float64(t)))
		vh := h.v[i] / (1 - math.Pow(b2, float64(t)))
		h.p[i] -= lr*mh/(math.Sqrt(vh)+eps) + lr*wd*h.p[i]
	}
}

func newTestParams(be kernels.Backend, seed uint64, shapes ...[]int) ([]*Param, []*hostAdam) {
	rng := newRNG(seed)
	var ps []*Param
	var hs []*hostAdam
	for i, sh := range shapes {
		p := newParam(be, "p"+string(rune('0'+i)), kernels.F32, sh...)
		w := randNormal(rng, p.W.Len(), 1)
		be.Upload(p.W, w)
		h := &hostAdam{p: make([]float64, len(w)), m: make([]float64, len(w)), v: make([]float64, len(w))}
		for j, x := range w {
			h.p[j] = float64(x)
		}
		ps, hs = append(ps, p), append(hs, h)
	}
	return ps, hs
}

func TestAdamMatchesHostReference(t *testing.T) {
	be := newBackend(t)
	for _, wd := range []float32{0, 0.05} {
		ps, hs := newTestParams(be, 1, []int{3, 4}, []int{5})
		opt := NewAdam()
		opt.WeightDecay = wd
		rng := newRNG(2)
		for step := 1; step <= 4; step++ {
			lr, scale := float32(1e-2)/float32(step), float32(1)/32
			for i, p := range ps {
				g := randNormal(rng, p.G.Len(), 32)
				be.Upload(p.G, g)
				hs[i].step(g, step, float64(lr), float64(scale), float64(wd))
			}
			opt.Step(be, ps, lr, scale)
		}
		if opt.StepCount != 4 {
			t.Errorf("StepCount %d after 4 steps", opt.StepCount)
		}
		for i, p := range ps {
			got := download(be, p.W)
			for j, v := range hs[i].p {
				if math.Abs(float64(got[j])-v) > 1e-6*(1+math.Abs(v)) {
					t.Fatalf("wd %g: param %d[%d] = %.8g, reference %.8g", wd, i, j, got[j], v)
				}
			}
		}
		opt.Free()
	}
}

// TestAdamStateRoundTrip: an optimizer restored from State continues
// bit-identically with the one that saved it.
func TestAdamStateRoundTrip(t *testing.T) {
	be := newBackend(t)
	psA, _ := newTestParams(be, 3, []int{2, 3}, []int{4})
	psB, _ := newTestParams(be, 3, []int{2, 3}, []int{4})
	a := NewAdam()
	rng := newRNG(4)
	grads := func() [][]float32 { return [][]float32{randNormal(rng, 6, 1), randNormal(rng, 4, 1)} }
	setG := func(ps []*Param, g [][]float32) {
		for i, p := range ps {
			be.Upload(p.G, g[i])
		}
	}
	for range 3 {
		g := grads()
		setG(psA, g)
		setG(psB, g)
		a.Step(be, psA, 1e-2, 1)
	}
	for i := range psA { // B's weights catch up with A's
		be.Upload(psB[i].W, download(be, psA[i].W))
	}
	st := a.State()
	if len(st) != 5 || st[0].Name != "step" || st[0].Int64[0] != 3 || st[1].Name != "state.0.exp_avg" || st[4].Name != "state.1.exp_avg_sq" {
		t.Fatalf("unexpected state layout: %v", names(st))
	}
	b := NewAdam()
	if err := b.LoadState(be, psB, st); err != nil {
		t.Fatal(err)
	}
	g := grads()
	setG(psA, g)
	setG(psB, g)
	a.Step(be, psA, 1e-2, 1)
	b.Step(be, psB, 1e-2, 1)
	for i := range psA {
		wa, wb := download(be, psA[i].W), download(be, psB[i].W)
		for j := range wa {
			if math.Float32bits(wa[j]) != math.Float32bits(wb[j]) {
				t.Fatalf("param %d[%d]: %v (continued) vs %v (restored)", i, j, wa[j], wb[j])
			}
		}
	}
}

func names(st []NamedTensor) []string {
	var out []string
	for _, e := range st {
		out = append(out, e.Name)
	}
	return out
}

func TestAdamLoadStateErrors(t *testing.T) {
	be := newBackend(t)
	ps, _ := newTestParams(be, 5, []int{2, 3}, []int{4})
	a := NewAdam()
	a.Step(be, ps, 1e-3, 1)
	good := a.State()
	cases := []struct {
		name string
		st   []NamedTensor
		want string
	}{
		{"no step", good[1:], `"step"`},
		{"missing moment", good[:4], `"state.1.exp_avg_sq"`},
		{"bad shape", func() []NamedTensor {
			st := a.State()
			st[1].Shape = []int{3, 2}
			return st
		}(), "[3 2]"},
		{"extra", append(a.State(), NamedTensor{Name: "state.2.exp_avg"}), "6 entries, want 5"},
	}
	for _, c := range cases {
		b := NewAdam()
		err := b.LoadState(be, ps, c.st)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %s", c.name, err, c.want)
		}
		if m, _ := b.Moments(); m != nil || b.StepCount != 0 {
			t.Errorf("%s: rejected state was partly loaded", c.name)
		}
	}
	fresh := NewAdam()
	if err := fresh.LoadState(be, ps, NewAdam().State()); err != nil {
		t.Errorf("fresh optimizer state rejected: %v", err)
	}
}

// TestMultiStepLR: hand-worked PyTorch MultiStepLR(milestones=[20,40,60,80],
// gamma=1/3) stepped per epoch; 0-based epoch e runs with
// base * gamma^(milestones <= e).
func TestMultiStepLR(t *testing.T) {
	s := ReferenceSchedule(1e-3)
	third := 1.0 / 3
	cases := map[int]float64{
		0: 1e-3, 1: 1e-3, 19: 1e-3,
		20: 1e-3 * third, 39: 1e-3 * third,
		40: 1e-3 * third * third, 59: 1e-3 * third * third,
		60: 1e-3 * third * third * third, 79: 1e-3 * third * third * third,
		80: 1e-3 * third * third * third * third, 100: 1e-3 * third * third * third * third,
	}
	for e, want := range cases {
		if got := s.LR(e); got != want {
			t.Errorf("epoch %d: lr %.17g, want %.17g", e, got, want)
		}
	}
	// Unsorted milestones with a repeat: both count at epoch 5, as in
	// PyTorch's Counter-based implementation.
	u := MultiStepLR{Base: 1, Milestones: []int{5, 2, 5}, Gamma: 0.5}
	for e, want := range []float64{1, 1, 0.5, 0.5, 0.5, 0.125, 0.125} {
		if got := u.LR(e); got != want {
			t.Errorf("milestones [5 2 5] epoch %d: lr %g, want %g", e, got, want)
		}
	}
}
