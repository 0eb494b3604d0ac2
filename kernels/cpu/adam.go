package cpu

import (
	"fmt"
	"math"

	"resnetlab/kernels"
)

// AdamStep is one fused multi-tensor Adam(W) step with the arithmetic of
// ColossalAI's multi_tensor_adam kernel in adamw mode, in float32:
//
//	g = grad*GradScale
//	m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
//	update = (m/bc1) / (sqrt(v/bc2) + eps) + wd*p;  p = p - lr*update
//
// with bc1 = 1-b1^t, bc2 = 1-b2^t (computed in float64, then rounded). A
// GradScale of 0 means "unset" and is taken as 1.
func (b *Backend) AdamStep(params, grads, m, v []*kernels.Tensor, hp kernels.AdamParams) {
	if len(grads) != len(params) || len(m) != len(params) || len(v) != len(params) {
		panic(fmt.Sprintf("cpu: AdamStep: %d params, %d grads, %d m, %d v (want equal counts)", len(params), len(grads), len(m), len(v)))
	}
	if hp.Step < 1 {
		panic(fmt.Sprintf("cpu: AdamStep: step %d (want the 1-based step count)", hp.Step))
	}
	gs := hp.GradScale
	if gs == 0 {
		gs = 1
	}
	bc1 := float32(1 - math.Pow(float64(hp.Beta1), float64(hp.Step)))
	bc2 := float32(1 - math.Pow(float64(hp.Beta2), float64(hp.Step)))
	for i, p := range params {
		for _, t := range []*kernels.Tensor{p, grads[i], m[i], v[i]} {
			b.check(t, "AdamStep")
			sameLen("AdamStep", p, t)
		}
		g, mt, vt := grads[i], m[i], v[i]
		c := newAdamConsts(hp, gs, bc1, bc2)
		b.parallel(p.Len(), grain, func(lo, hi int) {
			adamSlice(p.Host[lo:hi], g.Host[lo:hi], mt.Host[lo:hi], vt.Host[lo:hi], &c)
			roundSlice(p.DType, p.Host[lo:hi])
			roundSlice(mt.DType, mt.Host[lo:hi])
			roundSlice(vt.DType, vt.Host[lo:hi])
		})
	}
}

// adamConsts are the per-step constants of adamSlice, laid out for the
// assembly version (adam_amd64.s).
type adamConsts struct {
	gs, b1, omb1, b2, omb2, bc1, bc2, eps, wd, lr float32
}

func newAdamConsts(hp kernels.AdamParams, gs, bc1, bc2 float32) adamConsts {
	return adamConsts{gs: gs, b1: hp.Beta1, omb1: 1 - hp.Beta1, b2: hp.Beta2, omb2: 1 - hp.Beta2,
		bc1: bc1, bc2: bc2, eps: hp.Eps, wd: hp.WeightDecay, lr: hp.LR}
}

// adamSlice updates one slice; adamVec (8 lanes at a time, where the CPU
// has AVX2) does exactly the same IEEE operations, so both give the same
// bits.
func adamSlice(p, g, m, v []float32, c *adamConsts) {
	n := adamVec(p, g, m, v, c)
	adamGo(p[n:], g[n:], m[n:], v[n:], c)
}

// adamGo is the scalar update. The explicit float32 conversions forbid the
// compiler to fuse a multiply and an add (it may with GOAMD64=v3), so the
// result is the same on every build.
func adamGo(p, g, m, v []float32, c *adamConsts) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	for i := range p {
		gi := g[i] * c.gs
		mi := float32(c.b1*m[i]) + float32(c.omb1*gi)
		vi := float32(c.b2*v[i]) + float32(float32(c.omb2*gi)*gi)
		m[i], v[i] = mi, vi
		denom := float32(math.Sqrt(float64(vi/c.bc2))) + c.eps
		update := (mi/c.bc1)/denom + float32(c.wd*p[i])
		p[i] -= float32(c.lr * update)
	}
}
