package cpu

import (
	"math"
	"sync/atomic"

	"resnetlab/kernels"
)

// grain is the smallest slice of an element-wise op worth a goroutine.
const grain = 1 << 14

// ReLUForward computes y = max(x, 0); NaN propagates as in PyTorch.
func (b *Backend) ReLUForward(y, x *kernels.Tensor) {
	b.check(y, "ReLUForward y")
	b.check(x, "ReLUForward x")
	sameLen("ReLUForward", y, x)
	b.parallel(y.Len(), grain, func(lo, hi int) {
		ys, xs := y.Host[lo:hi], x.Host[lo:hi]
		for i, v := range xs {
			if v <= 0 {
				v = 0
			}
			ys[i] = v
		}
		roundSlice(y.DType, ys)
	})
}

// ReLUBackward computes dx = dy where y > 0, else 0. dx may alias dy.
func (b *Backend) ReLUBackward(dx, dy, y *kernels.Tensor) {
	b.check(dx, "ReLUBackward dx")
	b.check(dy, "ReLUBackward dy")
	b.check(y, "ReLUBackward y")
	sameLen("ReLUBackward", dx, dy)
	sameLen("ReLUBackward", dx, y)
	b.parallel(dx.Len(), grain, func(lo, hi int) {
		ds, gs, ys := dx.Host[lo:hi], dy.Host[lo:hi], y.Host[lo:hi]
		for i, g := range gs {
			if !(ys[i] > 0) {
				g = 0
			}
			ds[i] = g
		}
		roundSlice(dx.DType, ds)
	})
}

// Add computes y = a + b; y may alias a or b.
func (b *Backend) Add(y, a, c *kernels.Tensor) {
	b.check(y, "Add y")
	b.check(a, "Add a")
	b.check(c, "Add b")
	sameLen("Add", y, a)
	sameLen("Add", y, c)
	b.parallel(y.Len(), grain, func(lo, hi int) {
		ys, as, cs := y.Host[lo:hi], a.Host[lo:hi], c.Host[lo:hi]
		for i, v := range as {
			ys[i] = v + cs[i]
		}
		roundSlice(y.DType, ys)
	})
}

// Scale computes t *= s.
func (b *Backend) Scale(t *kernels.Tensor, s float32) {
	b.check(t, "Scale")
	b.parallel(t.Len(), grain, func(lo, hi int) {
		ts := t.Host[lo:hi]
		for i := range ts {
			ts[i] *= s
		}
		roundSlice(t.DType, ts)
	})
}

// NonFinite reports whether any element of any tensor is ±inf or NaN.
// Gemini's overflow vote scans every host gradient shard with it each
// step, so the scan is spread over the workers. A float32 is non-finite
// exactly when its exponent bits are all ones.
func (b *Backend) NonFinite(ts []*kernels.Tensor) bool {
	var bad atomic.Bool
	for _, t := range ts {
		b.check(t, "NonFinite")
		b.parallel(t.Len(), grain, func(lo, hi int) {
			if !bad.Load() && anyNonFinite(t.Host[lo:hi]) {
				bad.Store(true)
			}
		})
		if bad.Load() {
			return true
		}
	}
	return false
}

func anyNonFinite(xs []float32) bool {
	for _, v := range xs {
		if nonFinite(v) {
			return true
		}
	}
	return false
}

// nonFinite reports whether x is an inf or a NaN: its exponent bits all set.
func nonFinite(x float32) bool { return math.Float32bits(x)&expMask == expMask }
