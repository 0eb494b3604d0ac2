package graphtest

import (
	"slices"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/kernels/fusetest"
)

// TestFusedBNOutsideCapture: outside a capture the Recorder's fused ops are
// the wrapped backend's.
func TestFusedBNOutsideCapture(t *testing.T) {
	r := New(cpu.New())
	f := kernels.FusedBNOf(r)
	if f == nil {
		t.Fatal("Recorder over the CPU backend does not offer the fused ops")
	}
	fusetest.CheckBNAct(t, r, f, fusetest.BNActCases()[1])
}

// TestFusedBNCaptured: a captured BatchNormActForward runs at each replay,
// not at capture.
func TestFusedBNCaptured(t *testing.T) {
	r := New(cpu.New())
	f := kernels.FusedBNOf(r)
	x := r.New(kernels.CatActivations, kernels.F32, 2, 1, 2, 2)
	r.Upload(x, []float32{-3, 1, 2, 0.5, -1, 4, 0, 2})
	y := r.New(kernels.CatActivations, kernels.F32, 2, 1, 2, 2)
	g1, b1 := r.New(kernels.CatParams, kernels.F32, 1), r.New(kernels.CatParams, kernels.F32, 1)
	rm, rv := r.New(kernels.CatParams, kernels.F32, 1), r.New(kernels.CatParams, kernels.F32, 1)
	sm, si := r.New(kernels.CatActivations, kernels.F32, 1), r.New(kernels.CatActivations, kernels.F32, 1)
	r.Fill(g1, 1)
	r.Fill(rv, 1)
	_ = r.BeginCapture()
	f.BatchNormActForward(y, x, nil, g1, b1, rm, rv, sm, si, true, 0.1, 1e-5)
	gr, err := r.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	h := make([]float32, 8)
	if r.Download(y, h); slices.ContainsFunc(h, func(v float32) bool { return v != 0 }) {
		t.Fatalf("capturing ran the op: %v", h)
	}
	if err := gr.Launch(); err != nil {
		t.Fatal(err)
	}
	if r.Download(y, h); h[0] != 0 || h[5] <= 0 {
		t.Errorf("replayed fused BN+ReLU wrote %v: want 0 for x=-3, > 0 for x=4", h)
	}
}
