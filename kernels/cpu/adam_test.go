package cpu

import (
	"math"
	"testing"

	"resnetlab/kernels"
)

// TestAdamAgainstScalarReference runs several steps of the fused op over
// tensors of different sizes and compares with a scalar float64 Adam(W).
func TestAdamAgainstScalarReference(t *testing.T) {
	b := New(WithWorkers(2))
	rng := newRNG(31)
	sizes := []int{5, 3*grain + 1, 1}
	hp := kernels.AdamParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.05, GradScale: 1.0 / 32}
	var ps, gs, ms, vs []*kernels.Tensor
	var rp, rm, rv [][]float64
	for _, n := range sizes {
		p := randTensor(b, rng, n)
		ps = append(ps, p)
		gs = append(gs, b.New(kernels.CatGrads, kernels.F32, n))
		ms = append(ms, b.New(kernels.CatOptState, kernels.F32, n))
		vs = append(vs, b.New(kernels.CatOptState, kernels.F32, n))
		rp = append(rp, f64(p.Host))
		rm = append(rm, make([]float64, n))
		rv = append(rv, make([]float64, n))
	}
	// The reference uses the float32 hyper-parameters exactly (1-0.999 in
	// float32 is 1.3e-5 off 0.001), in float64 arithmetic.
	b1, b2, eps, wd, lr := float64(hp.Beta1), float64(hp.Beta2), float64(hp.Eps), float64(hp.WeightDecay), float64(hp.LR)
	for step := 1; step <= 5; step++ {
		for i, g := range gs {
			b.Upload(g, randVals(rng, g.Len()))
			for j, gv := range g.Host {
				gr := float64(gv) / 32
				rm[i][j] = b1*rm[i][j] + (1-b1)*gr
				rv[i][j] = b2*rv[i][j] + (1-b2)*gr*gr
				mh := rm[i][j] / (1 - math.Pow(b1, float64(step)))
				vh := rv[i][j] / (1 - math.Pow(b2, float64(step)))
				rp[i][j] -= lr * (mh/(math.Sqrt(vh)+eps) + wd*rp[i][j])
			}
		}
		hp.Step = step
		b.AdamStep(ps, gs, ms, vs, hp)
	}
	for i := range ps {
		assertClose(t, "param", ps[i].Host, rp[i], 1e-5)
		assertClose(t, "m", ms[i].Host, rm[i], 1e-5)
		assertClose(t, "v", vs[i].Host, rv[i], 1e-5)
	}
}

// TestAdamGradScaleUnset checks that GradScale 0 means 1.
func TestAdamGradScaleUnset(t *testing.T) {
	b := New()
	one := func(v ...float32) []*kernels.Tensor { return []*kernels.Tensor{tensorOf(b, v, len(v))} }
	g := one(0.25, 3)
	hp := kernels.AdamParams{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, Step: 1}
	p0, p1 := one(0.5, -1), one(0.5, -1)
	b.AdamStep(p0, g, one(0, 0), one(0, 0), hp)
	hp.GradScale = 1
	b.AdamStep(p1, g, one(0, 0), one(0, 0), hp)
	sameBits(t, "params", p0[0].Host, p1[0].Host)
	if p0[0].Host[0] == 0.5 {
		t.Errorf("Adam step did not move the parameter")
	}
}

// TestAdamVectorMatchesScalar checks that the vector update gives exactly
// the bits of the scalar one, including tiny, huge and zero values.
func TestAdamVectorMatchesScalar(t *testing.T) {
	rng := newRNG(33)
	hp := kernels.AdamParams{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3}
	c := newAdamConsts(hp, 1.0/1024, 1-0.9*0.9*0.9, 1-0.999*0.999*0.999)
	for _, n := range []int{1, 8, 13, 1000} {
		mk := func(scale float32) []float32 {
			v := randVals(rng, n)
			for i := range v {
				v[i] *= scale
			}
			return v
		}
		p, g, m, v := mk(1), mk(1e4), mk(1e-3), mk(1e-6)
		for i := range v {
			v[i] = float32(math.Abs(float64(v[i])))
		}
		g[0], v[0] = 0, 0
		p2, g2, m2, v2 := append([]float32(nil), p...), g, append([]float32(nil), m...), append([]float32(nil), v...)
		adamSlice(&adamArrays{p: p, g: g, m: m, v: v, po: p, mo: m, vo: v}, &c)
		adamGo(&adamArrays{p: p2, g: g2, m: m2, v: v2, po: p2, mo: m2, vo: v2}, &c)
		sameBits(t, "p", p, p2)
		sameBits(t, "m", m, m2)
		sameBits(t, "v", v, v2)
	}
}

// TestAdamStepToMatchesAdamStep checks that the out-of-place step writes
// the in-place step's bits and leaves its inputs alone.
func TestAdamStepToMatchesAdamStep(t *testing.T) {
	b := New()
	rng := newRNG(7)
	hp := kernels.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 4, GradScale: 0.25}
	const n = 5003 // a vector part and a scalar tail, several workers
	mk := func(abs bool) *kernels.Tensor {
		x := b.New(kernels.CatOptState, kernels.F32, n)
		copy(x.Host, randVals(rng, n))
		if abs {
			for i := range x.Host {
				x.Host[i] = float32(math.Abs(float64(x.Host[i])))
			}
		}
		return x
	}
	p, g, m, v := mk(false), mk(false), mk(false), mk(true)
	keep := [][]float32{append([]float32(nil), p.Host...), append([]float32(nil), m.Host...), append([]float32(nil), v.Host...)}
	po, mo, vo := b.New(kernels.CatOptState, kernels.F32, n), b.New(kernels.CatOptState, kernels.F32, n), b.New(kernels.CatOptState, kernels.F32, n)
	if b.AdamStepTo(po, mo, vo, p, g, m, v, hp) {
		t.Fatalf("finite gradients reported non-finite")
	}
	sameBits(t, "p untouched", p.Host, keep[0])
	sameBits(t, "m untouched", m.Host, keep[1])
	sameBits(t, "v untouched", v.Host, keep[2])
	b.AdamStep([]*kernels.Tensor{p}, []*kernels.Tensor{g}, []*kernels.Tensor{m}, []*kernels.Tensor{v}, hp)
	sameBits(t, "p", po.Host, p.Host)
	sameBits(t, "m", mo.Host, m.Host)
	sameBits(t, "v", vo.Host, v.Host)
}

// TestAdamStepToReportsNonFinite checks the overflow check fused into the
// out-of-place step: one inf or NaN anywhere (in a vector block or in the
// scalar tail) is reported, and finite gradients are not.
func TestAdamStepToReportsNonFinite(t *testing.T) {
	b := New()
	hp := kernels.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1, GradScale: 1}
	const n = 5003
	mk := func() *kernels.Tensor { return b.New(kernels.CatOptState, kernels.F32, n) }
	for _, at := range []int{0, 7, 2048, 4999, n - 1} {
		for _, bad := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
			g := mk()
			for i := range g.Host {
				g.Host[i] = 3e38 // finite, near the top of the range
			}
			if b.AdamStepTo(mk(), mk(), mk(), mk(), g, mk(), mk(), hp) {
				t.Fatalf("finite gradients near the top of the range reported non-finite")
			}
			g.Host[at] = bad
			if !b.AdamStepTo(mk(), mk(), mk(), mk(), g, mk(), mk(), hp) {
				t.Errorf("%g at %d of %d not reported", bad, at, n)
			}
		}
	}
}
