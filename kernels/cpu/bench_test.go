package cpu

import (
	"fmt"
	"syscall"
	"testing"

	"resnetlab/kernels"
)

// resnetConvs are the convolutions of ResNet-18 on 32x32 input at batch 100.
// count is how many times the shape occurs in the network.
var resnetConvs = []struct {
	name  string
	s     convShape
	count int
}{
	{"stem_3-64_7x7s2_32", convShape{N: 100, C: 3, H: 32, W: 32, K: 64, R: 7, S: 7, stride: 2, pad: 3}, 1},
	{"l1_64-64_3x3_8", convShape{N: 100, C: 64, H: 8, W: 8, K: 64, R: 3, S: 3, stride: 1, pad: 1}, 4},
	{"l2a_64-128_3x3s2_8", convShape{N: 100, C: 64, H: 8, W: 8, K: 128, R: 3, S: 3, stride: 2, pad: 1}, 1},
	{"l2_128-128_3x3_4", convShape{N: 100, C: 128, H: 4, W: 4, K: 128, R: 3, S: 3, stride: 1, pad: 1}, 3},
	{"l2ds_64-128_1x1s2_8", convShape{N: 100, C: 64, H: 8, W: 8, K: 128, R: 1, S: 1, stride: 2, pad: 0}, 1},
	{"l3a_128-256_3x3s2_4", convShape{N: 100, C: 128, H: 4, W: 4, K: 256, R: 3, S: 3, stride: 2, pad: 1}, 1},
	{"l3_256-256_3x3_2", convShape{N: 100, C: 256, H: 2, W: 2, K: 256, R: 3, S: 3, stride: 1, pad: 1}, 3},
	{"l3ds_128-256_1x1s2_4", convShape{N: 100, C: 128, H: 4, W: 4, K: 256, R: 1, S: 1, stride: 2, pad: 0}, 1},
	{"l4a_256-512_3x3s2_2", convShape{N: 100, C: 256, H: 2, W: 2, K: 512, R: 3, S: 3, stride: 2, pad: 1}, 1},
	{"l4_512-512_3x3_1", convShape{N: 100, C: 512, H: 1, W: 1, K: 512, R: 3, S: 3, stride: 1, pad: 1}, 3},
	{"l4ds_256-512_1x1s2_2", convShape{N: 100, C: 256, H: 2, W: 2, K: 512, R: 1, S: 1, stride: 2, pad: 0}, 1},
}

// flops is the multiply-add count x2 of the forward convolution (the
// nominal count: padded taps included, as is usual for conv benchmarks).
func (s convShape) flops() float64 {
	return 2 * float64(s.N*s.K*s.P()*s.Q()*s.C*s.R*s.S)
}

// BenchmarkConv measures forward and backward (dx and dw, twice the
// forward FLOPs) of every ResNet-18 convolution with 1 and 2 workers and
// reports GFLOP/s (nominal FLOPs, see flops).
func BenchmarkConv(b *testing.B) {
	for _, c := range resnetConvs {
		for _, workers := range []int{1, 2} {
			s := c.s
			be := New(WithWorkers(workers))
			rng := newRNG(1)
			x, w := randTensor(be, rng, s.N, s.C, s.H, s.W), randTensor(be, rng, s.K, s.C, s.R, s.S)
			y := be.New(kernels.CatActivations, kernels.F32, s.N, s.K, s.P(), s.Q())
			dx, dw := be.New(kernels.CatActivations, kernels.F32, x.Shape...), be.New(kernels.CatGrads, kernels.F32, w.Shape...)
			p := kernels.ConvParams{Stride: s.stride, Pad: s.pad}
			b.Run(fmt.Sprintf("%s/fwd/w%d", c.name, workers), func(b *testing.B) {
				cpu0 := cpuSeconds()
				for b.Loop() {
					be.Conv2dForward(y, x, w, p)
				}
				reportConv(b, s.flops(), cpu0)
			})
			b.Run(fmt.Sprintf("%s/bwd/w%d", c.name, workers), func(b *testing.B) {
				cpu0 := cpuSeconds()
				for b.Loop() {
					be.Conv2dBackward(dx, dw, y, x, w, p)
				}
				reportConv(b, 2*s.flops(), cpu0)
			})
		}
	}
}

// reportConv reports GFLOP/s over wall time and the CPU time per op.
func reportConv(b *testing.B, flops, cpu0 float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
}

// BenchmarkResNetStepConvs runs the forward and backward of every
// convolution of one ResNet-18 training step (batch 100, 32x32): the bulk
// of a CPU training step. ms/step is the number to watch; GFLOP/s counts
// nominal FLOPs (dropped all-padding taps included).
func BenchmarkResNetStepConvs(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("w%d", workers), func(b *testing.B) { benchStepConvs(b, New(WithWorkers(workers))) })
	}
}

func benchStepConvs(b *testing.B, be *Backend) {
	type conv struct {
		x, w, y, dx, dw *kernels.Tensor
		p               kernels.ConvParams
		count           int
	}
	var convs []conv
	var flops float64
	for _, c := range resnetConvs {
		s := c.s
		rng := newRNG(1)
		x, w := randTensor(be, rng, s.N, s.C, s.H, s.W), randTensor(be, rng, s.K, s.C, s.R, s.S)
		convs = append(convs, conv{x, w,
			be.New(kernels.CatActivations, kernels.F32, s.N, s.K, s.P(), s.Q()),
			be.New(kernels.CatActivations, kernels.F32, x.Shape...),
			be.New(kernels.CatGrads, kernels.F32, w.Shape...),
			kernels.ConvParams{Stride: s.stride, Pad: s.pad}, c.count})
		flops += 3 * s.flops() * float64(c.count)
	}
	cpu0 := cpuSeconds()
	for b.Loop() {
		for _, c := range convs {
			for range c.count {
				be.Conv2dForward(c.y, c.x, c.w, c.p)
				dx := c.dx
				if c.x.Shape[1] == 3 {
					dx = nil // the stem needs no input gradient
				}
				be.Conv2dBackward(dx, c.dw, c.y, c.x, c.w, c.p)
			}
		}
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(sec*1e3, "ms/step")
	// CPU time is the steadier number on a machine shared with other jobs.
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N)*1e3, "cpu-ms/step")
	b.ReportMetric(flops/sec/1e9, "GFLOP/s")
}

// BenchmarkGemm measures the bare GEMM on a square-ish problem.
func BenchmarkGemm(b *testing.B) {
	for _, sz := range [][4]int{{256, 256, 256, 1}, {64, 6400, 576, 1}, {512, 100, 4608, 1}, {64, 6400, 576, 2}, {512, 100, 4608, 2}} {
		M, N, K := sz[0], sz[1], sz[2]
		be := New(WithWorkers(sz[3]))
		rng := newRNG(2)
		a, bb, c := randVals(rng, M*K), randVals(rng, K*N), make([]float32, M*N)
		b.Run(fmt.Sprintf("%dx%dx%d/w%d", M, N, K, sz[3]), func(b *testing.B) {
			for b.Loop() {
				be.gemm(M, N, K, matrix{data: a, ld: K}, matrix{data: bb, ld: N}, c, N, false)
			}
			b.ReportMetric(2*float64(M*N*K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// cpuSeconds is the user+system CPU time of the process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// BenchmarkBatchNorm measures train-mode forward+backward on the stem's
// output, the largest activation of the network.
func BenchmarkBatchNorm(b *testing.B) {
	be := New()
	rng := newRNG(3)
	n, c, h, w := 100, 64, 16, 16
	x, gamma, beta := randTensor(be, rng, n, c, h, w), randTensor(be, rng, c), randTensor(be, rng, c)
	rm, rv, sm, si := randTensor(be, rng, c), randTensor(be, rng, c), randTensor(be, rng, c), randTensor(be, rng, c)
	y, dx := be.New(kernels.CatActivations, kernels.F32, x.Shape...), be.New(kernels.CatActivations, kernels.F32, x.Shape...)
	dg, db := randTensor(be, rng, c), randTensor(be, rng, c)
	cpu0 := cpuSeconds()
	for b.Loop() {
		be.BatchNormForward(y, x, gamma, beta, rm, rv, sm, si, true, 0.1, 1e-5)
		be.BatchNormBackward(dx, dg, db, y, x, gamma, sm, si)
	}
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
}

// BenchmarkMaxPool measures forward+backward of the stem's 3x3/2 pool.
func BenchmarkMaxPool(b *testing.B) {
	be := New()
	rng := newRNG(4)
	x := randTensor(be, rng, 100, 64, 16, 16)
	y := be.New(kernels.CatActivations, kernels.F32, 100, 64, 8, 8)
	dx := be.New(kernels.CatActivations, kernels.F32, x.Shape...)
	p := kernels.PoolParams{K: 3, Stride: 2, Pad: 1}
	cpu0 := cpuSeconds()
	for b.Loop() {
		be.MaxPoolForward(y, x, p)
		be.MaxPoolBackward(dx, y, x, p)
	}
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
}

// BenchmarkAdam measures one fused step over ResNet-18's 11.2M parameters.
func BenchmarkAdam(b *testing.B) {
	be := New()
	rng := newRNG(5)
	const n = 11_200_000
	p, g := randTensor(be, rng, n), randTensor(be, rng, n)
	m, v := be.New(kernels.CatOptState, kernels.F32, n), be.New(kernels.CatOptState, kernels.F32, n)
	hp := kernels.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, GradScale: 1}
	cpu0 := cpuSeconds()
	for b.Loop() {
		hp.Step++
		be.AdamStep([]*kernels.Tensor{p}, []*kernels.Tensor{g}, []*kernels.Tensor{m}, []*kernels.Tensor{v}, hp)
	}
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
}

// BenchmarkAdamStepTo measures Gemini's early out-of-place step over
// ResNet-18's 11.2M parameters, with its outputs aligned (streamed past
// the cache where the CPU has AVX2) and shifted by one element (ordinary
// stores), which isolates what the streaming stores save.
func BenchmarkAdamStepTo(b *testing.B) {
	for _, shift := range []int{0, 1} {
		name := map[int]string{0: "aligned", 1: "shifted"}[shift]
		b.Run(name, func(b *testing.B) {
			be := New()
			rng := newRNG(5)
			const n = 11_200_000
			p, g := randTensor(be, rng, n), randTensor(be, rng, n)
			m, v := be.New(kernels.CatOptState, kernels.F32, n), be.New(kernels.CatOptState, kernels.F32, n)
			out := func() *kernels.Tensor {
				t := be.New(kernels.CatOptState, kernels.F32, n+1)
				return kernels.View(t, shift, n)
			}
			po, mo, vo := out(), out(), out()
			hp := kernels.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, GradScale: 1, Step: 1}
			b.SetBytes(40 * n)
			for b.Loop() {
				be.AdamStepTo(po, mo, vo, p, g, m, v, hp)
			}
		})
	}
}

// BenchmarkCopyToF16 measures rounding ResNet-18's 11.2M fp32 master
// weights into an fp16 host tensor: Gemini's write-back into host payloads.
func BenchmarkCopyToF16(b *testing.B) {
	be := New()
	const n = 11_200_000
	src := randTensor(be, newRNG(1), n)
	dst := be.New(kernels.CatParams, kernels.F16, n)
	b.SetBytes(8 * n)
	for b.Loop() {
		be.Copy(dst, src)
	}
}
