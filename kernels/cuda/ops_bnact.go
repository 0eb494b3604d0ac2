package cuda

import (
	"fmt"

	"resnetlab/kernels"
)

// Fused batch norm + (residual add +) ReLU: kernels.FusedBN on the kernels
// bn_act_fwd_train, bn_act_fwd_eval and bn_act_bwd (src/ops.cu). One
// launch replaces two or three per layer
// and the intermediate tensors never go through memory; the results are
// bit-identical to the separate kernels' (bnact_device_test.go).

var _ kernels.FusedBN = (*Backend)(nil)

// FusedBNAvailable is always true: New checks that the PTX has the fused
// kernels (requiredKernels).
func (b *Backend) FusedBNAvailable() bool { return true }

// BatchNormActForward is BatchNormForward, Add(y, y, res) when res is not
// nil, and ReLUForward(y, y) in one kernel.
func (b *Backend) BatchNormActForward(y, x, res, gamma, beta, runMean, runVar, saveMean, saveInvStd *kernels.Tensor, training bool, momentum, eps float32) {
	defer b.enter("BatchNormActForward", x, res)()
	op := "BatchNormActForward"
	n, c, hw := b.checkBNForward(op, y, x, gamma, beta, runMean, runVar)
	b.owns(op, res)
	if res != nil {
		needShape(op, "res", res, x.Shape...)
	}
	rp, rdt := optional(res)
	if x.Len() == 0 {
		return
	}
	v := bnVec(hw, y, x, res)
	if !training {
		b.args.reset().ptr(y.Dev).i32(int(y.DType)).ptr(x.Dev).i32(int(x.DType)).ptr(rp).i32(rdt).
			ptr(gamma.Dev).ptr(beta.Dev).ptr(runMean.Dev).ptr(runVar.Dev).i32(n).i32(c).i32(hw).f32(eps).i32(v)
		b.launch("bn_act_fwd_eval", b.gridFor(x.Len()/v), 1, 1, 256)
		return
	}
	b.checkBNSaved(op, saveMean, saveInvStd, c)
	b.args.reset().ptr(y.Dev).i32(int(y.DType)).ptr(x.Dev).i32(int(x.DType)).ptr(rp).i32(rdt).
		ptr(gamma.Dev).ptr(beta.Dev).ptr(runMean.Dev).ptr(runVar.Dev).ptr(saveMean.Dev).ptr(saveInvStd.Dev).
		i32(n).i32(c).i32(hw).f32(momentum).f32(eps).i32(v)
	b.launch("bn_act_fwd_train", c, 1, 1, bnThreads(n*hw/v))
}

// BatchNormActBackward is ReLUBackward(ds, dy, y) then BatchNormBackward
// in one kernel; ds (y's dtype) may be nil.
func (b *Backend) BatchNormActBackward(dx, ds, dgamma, dbeta, dy, y, x, gamma, saveMean, saveInvStd *kernels.Tensor) {
	defer b.enter("BatchNormActBackward", dy)()
	op := "BatchNormActBackward"
	n, c, hw := b.checkBNBackward(op, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd)
	b.owns(op, ds, y)
	needShape(op, "y", y, x.Shape...)
	if ds != nil {
		needShape(op, "ds", ds, x.Shape...)
		if ds.DType != y.DType {
			panic(fmt.Sprintf("cuda: %s: ds %v must have y's dtype %s", op, ds, y.DType))
		}
	}
	if x.Len() == 0 {
		return
	}
	v := bnVec(hw, dx, ds, dy, y, x)
	dxp, dxt := optional(dx)
	dsp, _ := optional(ds)
	b.args.reset().ptr(dxp).i32(dxt).ptr(dsp).ptr(dy.Dev).i32(int(dy.DType)).ptr(y.Dev).i32(int(y.DType)).
		ptr(x.Dev).i32(int(x.DType)).ptr(gamma.Dev).ptr(saveMean.Dev).ptr(saveInvStd.Dev).
		ptr(dgamma.Dev).ptr(dbeta.Dev).i32(n).i32(c).i32(hw).i32(v)
	b.launch("bn_act_bwd", c, 1, 1, bnThreads(n*hw/v))
}
