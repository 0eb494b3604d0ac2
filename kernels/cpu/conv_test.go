package cpu

import (
	"fmt"
	"testing"

	"resnetlab/kernels"
)

// convCases cover every ResNet-18 geometry on odd, non-square shapes, plus
// a reduction deeper than one packed k-block (C*R*S > kcBlock).
var convCases = []convShape{
	{N: 3, C: 3, H: 11, W: 13, K: 7, R: 7, S: 7, stride: 2, pad: 3}, // stem
	{N: 3, C: 5, H: 9, W: 7, K: 6, R: 3, S: 3, stride: 1, pad: 1},
	{N: 3, C: 6, H: 9, W: 7, K: 10, R: 3, S: 3, stride: 2, pad: 1},
	{N: 3, C: 5, H: 7, W: 9, K: 11, R: 1, S: 1, stride: 2, pad: 0}, // downsample
	{N: 2, C: 70, H: 5, W: 6, K: 9, R: 3, S: 3, stride: 1, pad: 1},
	{N: 3, C: 2, H: 4, W: 5, K: 3, R: 2, S: 3, stride: 1, pad: 0},
	{N: 1, C: 3, H: 1, W: 1, K: 5, R: 3, S: 3, stride: 1, pad: 1}, // 1x1 maps: centre tap only
	{N: 3, C: 4, H: 2, W: 2, K: 5, R: 3, S: 3, stride: 2, pad: 1}, // 4 of 9 taps live
}

func (s convShape) String() string {
	return fmt.Sprintf("N%dC%dH%dW%dK%d_%dx%d_s%dp%d", s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad)
}

func runConv(t *testing.T, b *Backend, s convShape, seed uint64) {
	rng := newRNG(seed)
	x := randTensor(b, rng, s.N, s.C, s.H, s.W)
	w := randTensor(b, rng, s.K, s.C, s.R, s.S)
	y := b.New(kernels.CatActivations, kernels.F32, s.N, s.K, s.P(), s.Q())
	p := kernels.ConvParams{Stride: s.stride, Pad: s.pad}
	b.Conv2dForward(y, x, w, p)
	assertClose(t, "y", y.Host, refConv(s, f64(x.Host), f64(w.Host)), 1e-5)

	dy := randTensor(b, rng, y.Shape...)
	dx := b.New(kernels.CatActivations, kernels.F32, x.Shape...)
	dw := b.New(kernels.CatGrads, kernels.F32, w.Shape...)
	b.Fill(dx, 7) // outputs are written, not accumulated
	b.Fill(dw, 7)
	b.Conv2dBackward(dx, dw, dy, x, w, p)
	rdx, rdw := refConvBackward(s, f64(dy.Host), f64(x.Host), f64(w.Host))
	assertClose(t, "dx", dx.Host, rdx, 1e-5)
	assertClose(t, "dw", dw.Host, rdw, 1e-5)

	dw2 := b.New(kernels.CatGrads, kernels.F32, w.Shape...)
	b.Conv2dBackward(nil, dw2, dy, x, w, p)
	sameBits(t, "dw without dx", dw2.Host, dw.Host)
}

func TestConvAgainstReference(t *testing.T) {
	for _, s := range convCases {
		t.Run(s.String(), func(t *testing.T) { runConv(t, New(), s, 1) })
	}
}

// TestConvChunked forces the batch to be processed a few images at a time
// (dw then sums chunk partials) and checks the results again.
func TestConvChunked(t *testing.T) {
	old := colBudget
	defer func() { colBudget = old }()
	for _, s := range convCases[:4] {
		colBudget = 2 * s.C * s.R * s.S * s.P() * s.Q() // two images a chunk
		t.Run(s.String(), func(t *testing.T) { runConv(t, New(), s, 2) })
	}
}

// TestGemmAgainstReference runs with the micro-kernel in use (assembly
// where the CPU has AVX2/FMA) and again with the portable Go kernel.
func TestGemmAgainstReference(t *testing.T) {
	old := microKernel
	defer func() { microKernel = old }()
	for _, k := range []struct {
		name string
		fn   func(int, []float32, []float32, []float32, int, bool)
	}{{kernelName(), old}, {"pure-Go", kernelGo}} {
		microKernel = k.fn
		t.Run(k.name, testGemm)
	}
}

func testGemm(t *testing.T) {
	rng := newRNG(3)
	for _, sz := range [][3]int{{1, 1, 1}, {7, 17, 5}, {13, 40, 300}, {6, 16, 256}, {50, 3100, 9}, {5, 3, 600}} {
		M, N, K := sz[0], sz[1], sz[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				a, bb := randVals(rng, M*K), randVals(rng, K*N)
				A, B := matrix{data: a, ld: K}, matrix{data: bb, ld: N}
				ra, rb := f64(a), f64(bb)
				if ta { // store a transposed: a is K x M
					A.ld, A.t, ra = M, true, transpose64(ra, K, M)
				}
				if tb {
					B.ld, B.t, rb = K, true, transpose64(rb, N, K)
				}
				want := refGemm(M, N, K, ra, rb)
				c0 := randVals(rng, M*N)
				c := append([]float32(nil), c0...)
				be := New(WithWorkers(3))
				be.gemm(M, N, K, A, B, c, N, false)
				name := fmt.Sprintf("gemm%v_ta%v_tb%v", sz, ta, tb)
				assertClose(t, name, c, want, 1e-5)
				copy(c, c0)
				be.gemm(M, N, K, A, B, c, N, true)
				for i := range want {
					want[i] += float64(c0[i])
				}
				assertClose(t, name+"_acc", c, want, 1e-5)
			}
		}
	}
}

// transpose64 returns the r x c matrix m as c x r.
func transpose64(m []float64, r, c int) []float64 {
	out := make([]float64, len(m))
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			out[j*r+i] = m[i*c+j]
		}
	}
	return out
}
