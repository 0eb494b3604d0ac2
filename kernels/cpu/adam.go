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
		b.parallel(p.Len(), grain, func(lo, hi int) {
			adamSlice(p.Host[lo:hi], g.Host[lo:hi], mt.Host[lo:hi], vt.Host[lo:hi], hp, gs, bc1, bc2)
			roundSlice(p.DType, p.Host[lo:hi])
			roundSlice(mt.DType, mt.Host[lo:hi])
			roundSlice(vt.DType, vt.Host[lo:hi])
		})
	}
}

func adamSlice(p, g, m, v []float32, hp kernels.AdamParams, gs, bc1, bc2 float32) {
	b1, b2 := hp.Beta1, hp.Beta2
	for i := range p {
		gi := g[i] * gs
		mi := b1*m[i] + (1-b1)*gi
		vi := b2*v[i] + (1-b2)*gi*gi
		m[i], v[i] = mi, vi
		denom := float32(math.Sqrt(float64(vi/bc2))) + hp.Eps
		update := (mi/bc1)/denom + hp.WeightDecay*p[i]
		p[i] -= hp.LR * update
	}
}
