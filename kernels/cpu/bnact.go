package cpu

import (
	"fmt"

	"resnetlab/kernels"
)

// The fused batch norm + (add +) ReLU of kernels.FusedBN. Each op runs the
// very code of the separate ops on each slice while it is in cache: the
// batch norm writes and rounds a slice of y, then the add and the ReLU
// rewrite it with Add's and ReLUForward's arithmetic and rounding; in
// backward the ReLU mask is applied as ReLUBackward does, slice by slice,
// before BatchNormBackward's arithmetic reads it.

var _ kernels.FusedBN = (*Backend)(nil)

// FusedBNAvailable is always true: the CPU ops need nothing loaded.
func (b *Backend) FusedBNAvailable() bool { return true }

// BatchNormActForward is BatchNormForward, Add(y, y, res) when res is not
// nil, then ReLUForward(y, y).
func (b *Backend) BatchNormActForward(y, x, res, gamma, beta, runMean, runVar, saveMean, saveInvStd *kernels.Tensor, training bool, momentum, eps float32) {
	const op = "BatchNormActForward"
	if res != nil {
		b.check(res, op+" res")
		sameLen(op, y, res)
	}
	dt := y.DType
	b.bnForward(op, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, training, momentum, eps, func(dst []float32, off int) {
		if res != nil {
			rs := res.Host[off : off+len(dst)]
			for j, v := range dst {
				dst[j] = v + rs[j] // Add's y = a + b with a = y
			}
			roundSlice(dt, dst)
		}
		for j, v := range dst {
			if v <= 0 { // ReLUForward's test: NaN propagates
				v = 0
			}
			dst[j] = v
		}
		roundSlice(dt, dst)
	})
}

// BatchNormActBackward is ReLUBackward(ds, dy, y) then BatchNormBackward on
// the masked gradient; ds may be nil.
func (b *Backend) BatchNormActBackward(dx, ds, dgamma, dbeta, dy, y, x, gamma, saveMean, saveInvStd *kernels.Tensor) {
	const op = "BatchNormActBackward"
	for _, t := range []*kernels.Tensor{dx, dgamma, dbeta, dy, y, x, gamma, saveMean, saveInvStd} {
		b.check(t, op)
	}
	sameLen(op, dx, x)
	sameLen(op, dy, x)
	sameLen(op, y, x)
	if ds != nil {
		b.check(ds, op+" ds")
		sameLen(op, ds, x)
		if ds.DType != y.DType {
			panic(fmt.Sprintf("cpu: %s: ds %v must have y's dtype %s", op, ds, y.DType))
		}
	}
	dt := y.DType
	b.bnBackward(op, dx, dgamma, dbeta, x, gamma, saveMean, saveInvStd, func(scratch []float32, off, hw int) []float32 {
		out := scratch[:hw]
		if ds != nil {
			out = ds.Host[off : off+hw]
		}
		ys := y.Host[off : off+hw]
		for i, g := range dy.Host[off : off+hw] {
			if !(ys[i] > 0) { // ReLUBackward's test
				g = 0
			}
			out[i] = g
		}
		roundSlice(dt, out)
		return out
	})
}
