package cpu

import (
	"runtime"
	"testing"

	"resnetlab/kernels"
)

func TestMemoryAccounting(t *testing.T) {
	b := New()
	p := b.New(kernels.CatParams, kernels.F32, 3, 5)     // 60 bytes
	g := b.New(kernels.CatGrads, kernels.F16, 3, 5)      // 30 bytes
	a := b.New(kernels.CatActivations, kernels.BF16, 10) // 20 bytes
	m := b.MemStats()
	if m.InUse[kernels.CatParams] != 60 || m.InUse[kernels.CatGrads] != 30 || m.InUse[kernels.CatActivations] != 20 {
		t.Fatalf("in use %v, want params 60, grads 30, activations 20", m.InUse)
	}
	if m.Total() != 110 || m.TotalPeak != 110 {
		t.Fatalf("total %d, peak %d, want 110 and 110", m.Total(), m.TotalPeak)
	}
	b.Free(a)
	a2 := b.New(kernels.CatActivations, kernels.F32, 4) // 16 bytes
	m = b.MemStats()
	if m.InUse[kernels.CatActivations] != 16 || m.Peak[kernels.CatActivations] != 20 || m.TotalPeak != 110 {
		t.Fatalf("after free+new: in use %v, peak %v, total peak %d", m.InUse, m.Peak, m.TotalPeak)
	}
	b.ResetPeak()
	if m = b.MemStats(); m.Peak[kernels.CatActivations] != 16 || m.TotalPeak != 106 {
		t.Fatalf("after ResetPeak: peak %v, total peak %d, want activations 16, total 106", m.Peak, m.TotalPeak)
	}
	// A convolution charges its scratch to the workspace only while it runs.
	x := b.New(kernels.CatActivations, kernels.F32, 2, 3, 8, 8)
	w := b.New(kernels.CatParams, kernels.F32, 4, 3, 3, 3)
	y := b.New(kernels.CatActivations, kernels.F32, 2, 4, 8, 8)
	b.Conv2dForward(y, x, w, kernels.ConvParams{Stride: 1, Pad: 1})
	m = b.MemStats()
	const padded = 2 * 3 * 10 * 10 * 4 // the zero-padded input alone
	if m.InUse[kernels.CatWorkspace] != 0 || m.Peak[kernels.CatWorkspace] < padded {
		t.Fatalf("workspace in use %d, peak %d, want 0 and >= the padded input's %d",
			m.InUse[kernels.CatWorkspace], m.Peak[kernels.CatWorkspace], padded)
	}
	for _, tt := range []*kernels.Tensor{p, g, a2, x, w, y} {
		b.Free(tt)
	}
	if m = b.MemStats(); m.Total() != 0 {
		t.Fatalf("after freeing all: %v in use", m.InUse)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("using a freed tensor did not panic")
		}
	}()
	b.Fill(p, 1)
}

// TestScratchReused checks that repeating an op does not allocate its
// scratch buffers again (only a few small closures per call remain).
func TestScratchReused(t *testing.T) {
	b := New(WithWorkers(2))
	rng := newRNG(5)
	x, w := randTensor(b, rng, 3, 8, 6, 6), randTensor(b, rng, 16, 8, 3, 3)
	y := b.New(kernels.CatActivations, kernels.F32, 3, 16, 6, 6)
	p := kernels.ConvParams{Stride: 1, Pad: 1}
	b.Conv2dForward(y, x, w, p)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const calls = 10
	for range calls {
		b.Conv2dForward(y, x, w, p)
	}
	runtime.ReadMemStats(&after)
	colBytes := uint64(8 * 9 * 3 * 36 * 4) // what an im2col buffer would take
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > colBytes/4 {
		t.Errorf("Conv2dForward allocates %d bytes per call after warm-up (im2col alone is %d): scratch not reused", per, colBytes)
	}
}
