package cpu

import (
	"strings"
	"testing"

	"resnetlab/kernels"
)

func TestCopyPeer(t *testing.T) {
	a, b := New(WithWorkers(1)), New(WithWorkers(1))
	src := b.New(kernels.CatGrads, kernels.F16, 5)
	b.Upload(src, []float32{1, 2.001953125, -3, 4, 5}) // 2.001953125 is an fp16 value
	dst := a.New(kernels.CatGrads, kernels.F16, 5)
	f := a.NewFence()
	b.Signal(f)
	a.WaitFence(f)
	a.CopyPeer(dst, src)
	got := make([]float32, 5)
	a.Download(dst, got)
	for i, v := range []float32{1, 2.001953125, -3, 4, 5} {
		if got[i] != v {
			t.Fatalf("element %d: %v, want %v", i, got[i], v)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "dtypes differ") {
			t.Fatalf("fp32 from fp16: recovered %v, want a dtype panic", r)
		}
	}()
	a.CopyPeer(a.New(kernels.CatGrads, kernels.F32, 5), src)
}
