package cpu

import (
	"math"
	"testing"

	"resnetlab/kernels"
)

// Finite-difference gradient checks: the loss is L(x) = sum(f(x) * dy) with
// f the float64 reference forward, differentiated by central differences;
// the float32 backward op of the backend must match it.

// fdGrad returns dL/dx by central differences of L = sum(f(x)*dy).
func fdGrad(f func([]float64) []float64, x, dy []float64, h float64) []float64 {
	g := make([]float64, len(x))
	xp := append([]float64(nil), x...)
	for i := range x {
		xp[i] = x[i] + h
		lp := dot(f(xp), dy)
		xp[i] = x[i] - h
		lm := dot(f(xp), dy)
		xp[i] = x[i]
		g[i] = (lp - lm) / (2 * h)
	}
	return g
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func TestConvGradFD(t *testing.T) {
	for _, s := range []convShape{
		{N: 2, C: 3, H: 7, W: 6, K: 4, R: 3, S: 3, stride: 1, pad: 1},
		{N: 2, C: 2, H: 7, W: 9, K: 3, R: 3, S: 3, stride: 2, pad: 1},
		{N: 3, C: 2, H: 9, W: 7, K: 2, R: 7, S: 7, stride: 2, pad: 3},
		{N: 3, C: 3, H: 5, W: 7, K: 4, R: 1, S: 1, stride: 2, pad: 0},
		{N: 3, C: 2, H: 2, W: 2, K: 3, R: 3, S: 3, stride: 2, pad: 1}, // dropped taps
	} {
		t.Run(s.String(), func(t *testing.T) {
			b := New()
			rng := newRNG(11)
			x, w := randTensor(b, rng, s.N, s.C, s.H, s.W), randTensor(b, rng, s.K, s.C, s.R, s.S)
			dy := randTensor(b, rng, s.N, s.K, s.P(), s.Q())
			dx, dw := b.New(kernels.CatActivations, kernels.F32, x.Shape...), b.New(kernels.CatGrads, kernels.F32, w.Shape...)
			b.Conv2dBackward(dx, dw, dy, x, w, kernels.ConvParams{Stride: s.stride, Pad: s.pad})
			xs, ws, g := f64(x.Host), f64(w.Host), f64(dy.Host)
			assertClose(t, "dx", dx.Host, fdGrad(func(v []float64) []float64 { return refConv(s, v, ws) }, xs, g, 1e-3), 1e-5)
			assertClose(t, "dw", dw.Host, fdGrad(func(v []float64) []float64 { return refConv(s, xs, v) }, ws, g, 1e-3), 1e-5)
		})
	}
}

func TestBatchNormGradFD(t *testing.T) {
	b := New()
	rng := newRNG(12)
	n, c, h, w := 3, 4, 3, 5
	x, gamma, beta := randTensor(b, rng, n, c, h, w), randTensor(b, rng, c), randTensor(b, rng, c)
	rm, rv := b.New(kernels.CatParams, kernels.F32, c), b.New(kernels.CatParams, kernels.F32, c)
	sm, si := b.New(kernels.CatActivations, kernels.F32, c), b.New(kernels.CatActivations, kernels.F32, c)
	y := b.New(kernels.CatActivations, kernels.F32, x.Shape...)
	const eps = 1e-5
	b.BatchNormForward(y, x, gamma, beta, rm, rv, sm, si, true, 0.1, eps)
	dy := randTensor(b, rng, x.Shape...)
	dx, dg, db := b.New(kernels.CatActivations, kernels.F32, x.Shape...), b.New(kernels.CatGrads, kernels.F32, c), b.New(kernels.CatGrads, kernels.F32, c)
	b.BatchNormBackward(dx, dg, db, dy, x, gamma, sm, si)
	xs, gs, bs, g := f64(x.Host), f64(gamma.Host), f64(beta.Host), f64(dy.Host)
	fwd := func(x, gm, bt []float64) []float64 {
		y, _, _ := refBNTrain(x, gm, bt, n, c, h*w, eps)
		return y
	}
	assertClose(t, "dx", dx.Host, fdGrad(func(v []float64) []float64 { return fwd(v, gs, bs) }, xs, g, 1e-4), 1e-4)
	assertClose(t, "dgamma", dg.Host, fdGrad(func(v []float64) []float64 { return fwd(xs, v, bs) }, gs, g, 1e-4), 1e-5)
	assertClose(t, "dbeta", db.Host, fdGrad(func(v []float64) []float64 { return fwd(xs, gs, v) }, bs, g, 1e-4), 1e-5)
}

func TestPoolGradFD(t *testing.T) {
	b := New()
	rng := newRNG(13)
	n, c, h, w := 3, 2, 7, 6
	p := kernels.PoolParams{K: 3, Stride: 2, Pad: 1}
	P, Q := kernels.OutSize(h, 3, 2, 1), kernels.OutSize(w, 3, 2, 1)
	x := randTensor(b, rng, n, c, h, w)
	dy := randTensor(b, rng, n, c, P, Q)
	dx := b.New(kernels.CatActivations, kernels.F32, x.Shape...)
	b.MaxPoolBackward(dx, dy, x, p)
	// Piecewise linear: a tiny step never crosses a kink for random inputs.
	want := fdGrad(func(v []float64) []float64 { return refMaxPool(v, n, c, h, w, 3, 2, 1) }, f64(x.Host), f64(dy.Host), 1e-7)
	assertClose(t, "maxpool dx", dx.Host, want, 1e-6)

	dg := randTensor(b, rng, n, c)
	b.GlobalAvgPoolBackward(dx, dg)
	want = fdGrad(func(v []float64) []float64 { return refAvgPool(v, n*c, h*w) }, f64(x.Host), f64(dg.Host), 1e-3)
	assertClose(t, "avgpool dx", dx.Host, want, 1e-6)
}

func TestLinearGradFD(t *testing.T) {
	b := New()
	rng := newRNG(14)
	n, in, out := 3, 13, 5
	x, w, bias := randTensor(b, rng, n, in), randTensor(b, rng, out, in), randTensor(b, rng, out)
	dy := randTensor(b, rng, n, out)
	dx, dw, db := b.New(kernels.CatActivations, kernels.F32, n, in), b.New(kernels.CatGrads, kernels.F32, out, in), b.New(kernels.CatGrads, kernels.F32, out)
	b.LinearBackward(dx, dw, db, dy, x, w)
	xs, ws, bs, g := f64(x.Host), f64(w.Host), f64(bias.Host), f64(dy.Host)
	assertClose(t, "dx", dx.Host, fdGrad(func(v []float64) []float64 { return refLinear(v, ws, bs, n, in, out) }, xs, g, 1e-3), 1e-5)
	assertClose(t, "dw", dw.Host, fdGrad(func(v []float64) []float64 { return refLinear(xs, v, bs, n, in, out) }, ws, g, 1e-3), 1e-5)
	assertClose(t, "db", db.Host, fdGrad(func(v []float64) []float64 { return refLinear(xs, ws, v, n, in, out) }, bs, g, 1e-3), 1e-5)
}

func TestCrossEntropyGradFD(t *testing.T) {
	b := New()
	rng := newRNG(15)
	n, k := 3, 7
	z := randTensor(b, rng, n, k)
	labs := []int{6, 2, 0}
	labels := tensorOf(b, []float32{6, 2, 0}, n)
	loss, dz := b.New(kernels.CatActivations, kernels.F32, 1), b.New(kernels.CatActivations, kernels.F32, n, k)
	const scale = 8
	b.SoftmaxCrossEntropy(loss, dz, z, labels, scale)
	f := func(v []float64) []float64 { return []float64{scale * refCE(v, labs, n, k)} }
	assertClose(t, "dlogits", dz.Host, fdGrad(f, f64(z.Host), []float64{1}, 1e-4), 1e-5)
}

func TestReLUGradFD(t *testing.T) {
	b := New()
	rng := newRNG(16)
	x := randTensor(b, rng, 3, 5, 7)
	for i, v := range x.Host {
		if math.Abs(float64(v)) < 1e-3 { // keep clear of the kink
			x.Host[i] = 0.5
		}
	}
	y, dx := b.New(kernels.CatActivations, kernels.F32, x.Shape...), b.New(kernels.CatActivations, kernels.F32, x.Shape...)
	b.ReLUForward(y, x)
	dy := randTensor(b, rng, x.Shape...)
	b.ReLUBackward(dx, dy, y)
	relu := func(v []float64) []float64 {
		out := make([]float64, len(v))
		for i, a := range v {
			out[i] = math.Max(a, 0)
		}
		return out
	}
	assertClose(t, "dx", dx.Host, fdGrad(relu, f64(x.Host), f64(dy.Host), 1e-4), 1e-6)
}
