package model

import (
	"math/rand/v2"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
)

// BenchmarkTrainStep times one training step of the full-width ResNet-18
// (forward, loss, backward, Adam) at the reference batch of 100 on 32x32
// images, on the CPU backend with every core. Reports images/s.
func BenchmarkTrainStep(b *testing.B) {
	for _, w := range []int{64, 16} {
		b.Run(map[int]string{64: "width64", 16: "width16"}[w], func(b *testing.B) {
			benchStep(b, cpu.New(), w, 100)
		})
	}
	// The same step with BN, add and ReLU as separate ops (the fused ones
	// hidden), for the fusion's gain on the CPU.
	b.Run("width16/separate-bn", func(b *testing.B) { benchStep(b, separateOps{cpu.New()}, 16, 100) })
}

func benchStep(b *testing.B, be kernels.Backend, width, batch int) {
	m := NewResNet18(be, Config{Width: width, InChannels: 3, NumClasses: 10, DType: kernels.F32, Seed: 1})
	ce := NewCrossEntropy(be)
	opt := NewAdam()
	r := rand.New(rand.NewPCG(1, 2))
	xh := make([]float32, batch*3*32*32)
	yh := make([]float32, batch)
	for i := range xh {
		xh[i] = r.Float32()
	}
	for i := range yh {
		yh[i] = float32(r.IntN(10))
	}
	x := be.New(kernels.CatData, kernels.F32, batch, 3, 32, 32)
	y := be.New(kernels.CatData, kernels.F32, batch)
	be.Upload(x, xh)
	be.Upload(y, yh)
	step := func() {
		logits := m.Forward(x, true)
		_, dl := ce.Forward(logits, y, 1, true)
		m.Backward(dl)
		opt.Step(be, m.Params(), 1e-3, 1)
	}
	step() // allocate activations and Adam state
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "images/s")
}
