package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"resnetlab/kernels"
)

// trainer runs the recipe's step: forward, cross-entropy, backward, Adam.
type trainer struct {
	be  kernels.Backend
	m   *ResNet
	ce  *CrossEntropy
	opt *Adam
}

func newTrainer(be kernels.Backend, cfg Config) *trainer {
	return &trainer{be: be, m: NewResNet18(be, cfg), ce: NewCrossEntropy(be), opt: NewAdam()}
}

func (tr *trainer) step(x, labels *kernels.Tensor, lr float32) float32 {
	logits := tr.m.Forward(x, true)
	_, dl := tr.ce.Forward(logits, labels, 1, true)
	tr.m.Backward(dl)
	tr.opt.Step(tr.be, tr.m.Params(), lr, 1)
	return tr.ce.Value()
}

func (tr *trainer) free() {
	tr.opt.Free()
	tr.ce.Free()
	tr.m.Free()
}

func batch(be kernels.Backend, seed uint64, n int) (x, labels *kernels.Tensor) {
	rng := newRNG(seed)
	x, _ = images(be, rng, n, 3, 32)
	lab := make([]float32, n)
	for i := range lab {
		lab[i] = float32(i % 10)
	}
	rng.Shuffle(n, func(i, j int) { lab[i], lab[j] = lab[j], lab[i] })
	return x, upload(be, kernels.CatData, kernels.F32, lab, n)
}

// snapshot is every bit of a trainer's state after a step.
func (tr *trainer) snapshot() [][]float32 {
	var out [][]float32
	for _, e := range tr.m.StateDict() {
		out = append(out, e.Data)
	}
	for _, p := range tr.m.Params() {
		out = append(out, download(tr.be, p.G))
	}
	for _, e := range tr.opt.State() {
		out = append(out, e.Data)
	}
	return out
}

func TestTrainingStepDeterministic(t *testing.T) {
	be := newBackend(t)
	x, labels := batch(be, 1, 6)
	var snaps [2][][]float32
	for i := range snaps {
		tr := newTrainer(be, smallConfig(8, 3))
		tr.step(x, labels, 1e-3)
		tr.step(x, labels, 1e-3)
		snaps[i] = tr.snapshot()
		tr.free()
	}
	for i := range snaps[0] {
		a, b := snaps[0][i], snaps[1][i]
		if !slices.EqualFunc(a, b, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) }) {
			t.Fatalf("state entry %d differs between two identical runs", i)
		}
	}
}

// TestLearnsFixedBatch: width 8, 24 Adam steps (lr 2e-3) on one batch of 16
// random images with fixed labels must cut the loss to under a quarter.
func TestLearnsFixedBatch(t *testing.T) {
	be := newBackend(t)
	tr := newTrainer(be, smallConfig(8, 4))
	defer tr.free()
	x, labels := batch(be, 2, 16)
	first := tr.step(x, labels, 2e-3)
	last := first
	for range 23 {
		last = tr.step(x, labels, 2e-3)
	}
	if math.IsNaN(float64(last)) || last > first/4 {
		t.Errorf("loss %.4f -> %.4f after 24 steps, want below %.4f", first, last, first/4)
	}
	t.Logf("loss %.4f -> %.4f", first, last)
}

// countingBackend counts tensor allocations.
type countingBackend struct {
	kernels.Backend
	news, frees int
}

func (c *countingBackend) New(cat kernels.Category, dt kernels.DType, shape ...int) *kernels.Tensor {
	c.news++
	return c.Backend.New(cat, dt, shape...)
}

func (c *countingBackend) Free(t *kernels.Tensor) {
	c.frees++
	c.Backend.Free(t)
}

// TestNoAllocationPerStep: after the first step, training steps allocate
// nothing; a different (eval) batch size reallocates the activations and
// going back reallocates once more, then steady state again.
// The same holds with the fused BN+ReLU ops (countingFused) and without
// (countingBackend hides them).
func TestNoAllocationPerStep(t *testing.T) {
	for _, fused := range []bool{false, true} {
		cb := &countingBackend{Backend: newBackend(t)}
		var be kernels.Backend = cb
		if fused {
			be = countingFused{cb, kernels.FusedBNOf(cb.Backend)}
		}
		if (kernels.FusedBNOf(be) != nil) != fused {
			t.Fatalf("fused %v: backend offers the fused ops: %v", fused, kernels.FusedBNOf(be) != nil)
		}
		noAllocationPerStep(t, be, cb)
	}
}

// countingFused is a countingBackend that keeps the fused BN ops.
type countingFused struct {
	*countingBackend
	kernels.FusedBN
}

func noAllocationPerStep(t *testing.T, be kernels.Backend, cb *countingBackend) {
	tr := newTrainer(be, smallConfig(4, 1))
	defer tr.free()
	x, labels := batch(be, 3, 4)
	xe, _ := batch(be, 4, 6)
	tr.step(x, labels, 1e-3)
	expectAllocs := func(what string, f func(), want bool) {
		t.Helper()
		n0, f0 := cb.news, cb.frees
		f()
		if got := cb.news - n0; (got > 0) != want || (cb.frees-f0 > 0) != want {
			t.Errorf("%s: %d allocations, %d frees (want some: %v)", what, got, cb.frees-f0, want)
		}
	}
	expectAllocs("steps 2-3", func() { tr.step(x, labels, 1e-3); tr.step(x, labels, 1e-3) }, false)
	expectAllocs("eval at batch 6", func() { tr.m.Forward(xe, false) }, true)
	expectAllocs("second eval at batch 6", func() { tr.m.Forward(xe, false) }, false)
	expectAllocs("back to training", func() { tr.step(x, labels, 1e-3) }, true)
	expectAllocs("steady training", func() { tr.step(x, labels, 1e-3) }, false)
}

// recorder logs hook calls.
type recorder struct{ log []string }

func (r *recorder) PreForward(m Module)   { r.log = append(r.log, "F> "+m.Name()) }
func (r *recorder) PostForward(m Module)  { r.log = append(r.log, "F< "+m.Name()) }
func (r *recorder) PreBackward(m Module)  { r.log = append(r.log, "B> "+m.Name()) }
func (r *recorder) PostBackward(m Module) { r.log = append(r.log, "B< "+m.Name()) }

func TestHooksAroundEveryParametrisedLayer(t *testing.T) {
	be := newBackend(t)
	tr := newTrainer(be, smallConfig(4, 1))
	defer tr.free()
	rec := &recorder{}
	tr.m.SetHooks(rec)
	x, labels := batch(be, 5, 2)
	tr.step(x, labels, 1e-3)
	var fwd, bwd []string
	for i := 0; i < len(rec.log); i += 2 {
		pre, post := rec.log[i], rec.log[i+1]
		if pre[:3] == "F> " && post == "F< "+pre[3:] {
			fwd = append(fwd, pre[3:])
		} else if pre[:3] == "B> " && post == "B< "+pre[3:] {
			bwd = append(bwd, pre[3:])
		} else {
			t.Fatalf("hook calls %q, %q are not a pre/post pair", pre, post)
		}
	}
	var want []string
	for _, l := range tr.m.Layers() {
		want = append(want, l.Name())
	}
	if len(want) != 41 || !slices.Equal(fwd, want) {
		t.Errorf("forward hooks on %v, want the 41 layers %v", fwd, want)
	}
	if len(bwd) != 41 || bwd[0] != "fc" || bwd[40] != "conv1" || !sameSet(bwd, want) {
		t.Errorf("backward hooks on %v, want all 41 layers from fc to conv1", bwd)
	}
	tr.m.SetHooks(nil)
	n := len(rec.log)
	tr.step(x, labels, 1e-3)
	if len(rec.log) != n {
		t.Errorf("hooks still called after SetHooks(nil)")
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestBackwardOverwritesGradients: a second backward on the same batch
// gives the same gradients (not twice them).
func TestBackwardOverwritesGradients(t *testing.T) {
	be := newBackend(t)
	m := NewResNet18(be, smallConfig(4, 1))
	defer m.Free()
	x, _ := batch(be, 6, 3)
	r := upload(be, kernels.CatData, kernels.F32, randNormal(rand.New(rand.NewPCG(1, 2)), 30, 1), 3, 10)
	var g [2][]float32
	for i := range g {
		m.Forward(x, true)
		m.Backward(r)
		for _, p := range m.Params() {
			g[i] = append(g[i], download(be, p.G)...)
		}
	}
	if !slices.Equal(g[0], g[1]) {
		t.Error("gradients of two identical backward passes differ (accumulated?)")
	}
}
