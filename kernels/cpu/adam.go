package cpu

import (
	"fmt"
	"math"
	"sync/atomic"

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
	c := b.adamConsts("AdamStep", hp)
	for i, p := range params {
		b.adamTensor("AdamStep", p, m[i], v[i], p, grads[i], m[i], v[i], &c)
	}
}

// AdamStepTo is AdamStep of one tensor written out of place: it reads p,
// grad, m and v, leaves them as they were and writes the updated p, m and
// v to po, mo and vo, with the same arithmetic bit for bit. Gemini runs
// its host half this way while backward still runs, before the overflow
// vote, and keeps the result only when the step counts. It reports
// whether grad held an inf or NaN (the outputs are then meaningless), which
// is the overflow check of the shard at no extra pass over it.
func (b *Backend) AdamStepTo(po, mo, vo, p, grad, m, v *kernels.Tensor, hp kernels.AdamParams) (nonFinite bool) {
	c := b.adamConsts("AdamStepTo", hp)
	return b.adamTensor("AdamStepTo", po, mo, vo, p, grad, m, v, &c)
}

// adamConsts checks hp and derives the step's constants.
func (b *Backend) adamConsts(op string, hp kernels.AdamParams) adamConsts {
	if hp.Step < 1 {
		panic(fmt.Sprintf("cpu: %s: step %d (want the 1-based step count)", op, hp.Step))
	}
	gs := hp.GradScale
	if gs == 0 {
		gs = 1
	}
	bc1 := float32(1 - math.Pow(float64(hp.Beta1), float64(hp.Step)))
	bc2 := float32(1 - math.Pow(float64(hp.Beta2), float64(hp.Step)))
	return newAdamConsts(hp, gs, bc1, bc2)
}

// adamTensor updates one tensor on every worker: (p, m, v) with grad g
// into (po, mo, vo), which may be the same tensors, and reports whether g
// held an inf or NaN.
func (b *Backend) adamTensor(op string, po, mo, vo, p, g, m, v *kernels.Tensor, c *adamConsts) bool {
	var bad atomic.Bool
	for _, t := range []*kernels.Tensor{po, mo, vo, p, g, m, v} {
		b.check(t, op)
		sameLen(op, p, t)
	}
	n := p.Len()
	// Split on multiples of 8 elements, so that every slice of tensors
	// whose bases are aligned (large allocations, pinned buffers) starts
	// 32-byte aligned and can stream its outputs (adamVec).
	b.parallel((n+7)/8, grain/8, func(lo, hi int) {
		lo, hi = 8*lo, min(8*hi, n)
		a := adamArrays{p: p.Host[lo:hi], g: g.Host[lo:hi], m: m.Host[lo:hi], v: v.Host[lo:hi],
			po: po.Host[lo:hi], mo: mo.Host[lo:hi], vo: vo.Host[lo:hi]}
		if adamSlice(&a, c) {
			bad.Store(true)
		}
		roundSlice(po.DType, a.po)
		roundSlice(mo.DType, a.mo)
		roundSlice(vo.DType, a.vo)
	})
	return bad.Load()
}

// adamArrays are one slice's inputs and outputs (outputs may alias inputs).
type adamArrays struct {
	p, g, m, v, po, mo, vo []float32
}

// adamConsts are the per-step constants of adamSlice, laid out for the
// assembly version (adam_amd64.s).
type adamConsts struct {
	gs, b1, omb1, b2, omb2, bc1, bc2, eps, wd, lr float32
	exp                                           [8]uint32 // float32 exponent mask per lane (inf/NaN test)
}

func newAdamConsts(hp kernels.AdamParams, gs, bc1, bc2 float32) adamConsts {
	return adamConsts{gs: gs, b1: hp.Beta1, omb1: 1 - hp.Beta1, b2: hp.Beta2, omb2: 1 - hp.Beta2,
		bc1: bc1, bc2: bc2, eps: hp.Eps, wd: hp.WeightDecay, lr: hp.LR,
		exp: [8]uint32{expMask, expMask, expMask, expMask, expMask, expMask, expMask, expMask}}
}

// expMask is float32's exponent field: all set in an inf or a NaN.
const expMask = 0x7f800000

// adamSlice updates one slice; adamVec (8 lanes at a time, where the CPU
// has AVX2) does exactly the same IEEE operations, so both give the same
// bits. It reports whether a gradient of the slice was inf or NaN.
func adamSlice(a *adamArrays, c *adamConsts) bool {
	n, bad := adamVec(a, c)
	return adamGo(&adamArrays{p: a.p[n:], g: a.g[n:], m: a.m[n:], v: a.v[n:], po: a.po[n:], mo: a.mo[n:], vo: a.vo[n:]}, c) || bad
}

// adamGo is the scalar update. The explicit float32 conversions forbid the
// compiler to fuse a multiply and an add (it may with GOAMD64=v3), so the
// result is the same on every build. It reports whether a gradient was
// inf or NaN.
func adamGo(a *adamArrays, c *adamConsts) bool {
	n := len(a.p)
	g, m, v, po, mo, vo := a.g[:n], a.m[:n], a.v[:n], a.po[:n], a.mo[:n], a.vo[:n]
	bad := false
	for i, pi := range a.p {
		bad = bad || nonFinite(g[i])
		gi := g[i] * c.gs
		mi := float32(c.b1*m[i]) + float32(c.omb1*gi)
		vi := float32(c.b2*v[i]) + float32(float32(c.omb2*gi)*gi)
		mo[i], vo[i] = mi, vi
		denom := float32(math.Sqrt(float64(vi/c.bc2))) + c.eps
		update := (mi/c.bc1)/denom + float32(c.wd*pi)
		po[i] = pi - float32(c.lr*update)
	}
	return bad
}
