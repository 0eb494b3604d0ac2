package cuda

import (
	"fmt"

	"resnetlab/kernels"
)

// poolShape mirrors PoolShape in src/ops.cu.
type poolShape struct{ N, C, H, W, P, Q, K, Stride, Pad int32 }

func (b *Backend) poolShape(op string, y, x *kernels.Tensor, p kernels.PoolParams) poolShape {
	if len(x.Shape) != 4 {
		panic(fmt.Sprintf("cuda: %s: input %v is not NCHW", op, x))
	}
	if p.K <= 0 || p.Stride <= 0 || p.Pad < 0 || p.Pad >= p.K {
		panic(fmt.Sprintf("cuda: %s: bad pooling window %+v", op, p))
	}
	n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	P, Q := kernels.OutSize(h, p.K, p.Stride, p.Pad), kernels.OutSize(w, p.K, p.Stride, p.Pad)
	needShape(op, "output", y, n, c, P, Q)
	return poolShape{int32(n), int32(c), int32(h), int32(w), int32(P), int32(Q), int32(p.K), int32(p.Stride), int32(p.Pad)}
}

func (b *Backend) MaxPoolForward(y, x *kernels.Tensor, p kernels.PoolParams) {
	defer b.enter("MaxPoolForward", y, x)()
	b.owns("MaxPoolForward", y, x)
	s := b.poolShape("MaxPoolForward", y, x, p)
	if n := y.Len(); n > 0 {
		raw(b.args.reset().ptr(y.Dev).i32(int(y.DType)).ptr(x.Dev).i32(int(x.DType)), &s)
		b.launch("maxpool_fwd", b.gridFor(n), 1, 1, 256)
	}
}

// MaxPoolBackward finds each window's first maximum (one pass over the
// outputs into an index scratch), then gathers dy into dx without atomics.
func (b *Backend) MaxPoolBackward(dx, dy, x *kernels.Tensor, p kernels.PoolParams) {
	defer b.enter("MaxPoolBackward", dy, x)()
	b.owns("MaxPoolBackward", dx, dy, x)
	s := b.poolShape("MaxPoolBackward", dy, x, p)
	needShape("MaxPoolBackward", "dx", dx, x.Shape...)
	no, ni := dy.Len(), dx.Len()
	if ni == 0 {
		return
	}
	idx := b.workspace(int64(no) * 4)
	raw(b.args.reset().ptr(idx).ptr(x.Dev).i32(int(x.DType)), &s)
	b.launch("maxpool_argmax", b.gridFor(no), 1, 1, 256)
	raw(b.args.reset().ptr(dx.Dev).i32(int(dx.DType)).ptr(dy.Dev).i32(int(dy.DType)).ptr(idx), &s)
	b.launch("maxpool_bwd", b.gridFor(ni), 1, 1, 256)
	b.release(idx, int64(no)*4)
}

func (b *Backend) GlobalAvgPoolForward(y, x *kernels.Tensor) {
	defer b.enter("GlobalAvgPoolForward", y, x)()
	b.owns("GlobalAvgPoolForward", y, x)
	if len(x.Shape) != 4 {
		panic(fmt.Sprintf("cuda: GlobalAvgPoolForward: input %v is not NCHW", x))
	}
	needShape("GlobalAvgPoolForward", "output", y, x.Shape[0], x.Shape[1])
	nc, hw := y.Len(), x.Shape[2]*x.Shape[3]
	if nc > 0 {
		b.args.reset().ptr(y.Dev).i32(int(y.DType)).ptr(x.Dev).i32(int(x.DType)).i64(nc).i32(hw)
		b.launch("avgpool_fwd", b.gridFor(nc*4), 1, 1, 256)
	}
}

func (b *Backend) GlobalAvgPoolBackward(dx, dy *kernels.Tensor) {
	defer b.enter("GlobalAvgPoolBackward", dx, dy)()
	b.owns("GlobalAvgPoolBackward", dx, dy)
	if len(dx.Shape) != 4 {
		panic(fmt.Sprintf("cuda: GlobalAvgPoolBackward: dx %v is not NCHW", dx))
	}
	needShape("GlobalAvgPoolBackward", "dy", dy, dx.Shape[0], dx.Shape[1])
	n, hw := dx.Len(), dx.Shape[2]*dx.Shape[3]
	if n > 0 {
		b.args.reset().ptr(dx.Dev).i32(int(dx.DType)).ptr(dy.Dev).i32(int(dy.DType)).i64(n).i32(hw)
		b.launch("avgpool_bwd", b.gridFor(n), 1, 1, 256)
	}
}

// bnDims returns N, C and the spatial size of a [N,C,...] tensor.
func bnDims(op string, x *kernels.Tensor) (int, int, int) {
	if len(x.Shape) < 2 {
		panic(fmt.Sprintf("cuda: %s: input %v needs at least [N,C]", op, x))
	}
	hw := 1
	for _, d := range x.Shape[2:] {
		hw *= d
	}
	return x.Shape[0], x.Shape[1], hw
}

// bnThreads picks the block size of the per-channel BN kernels for a
// channel of the given number of chunks: about two chunks a thread, so
// that each thread has loads in flight, within 128..1024.
func bnThreads(chunks int) int {
	t := 128
	for t < 1024 && 2*t < chunks {
		t *= 2
	}
	return t
}

// bnVec is the chunk width of the BN kernels (src/ops.cu): the largest of
// 8, 4 and 2 that divides the plane hw and to whose size in bytes (16 at
// most) every operand given is aligned, else 1.
func bnVec(hw int, ts ...*kernels.Tensor) int {
	for v := 8; v > 1; v /= 2 {
		if hw%v == 0 && aligned(v, ts) {
			return v
		}
	}
	return 1
}

func aligned(v int, ts []*kernels.Tensor) bool {
	for _, t := range ts {
		if t != nil && t.Dev%uintptr(min(16, v*t.DType.Size())) != 0 {
			return false
		}
	}
	return true
}

// checkBNForward checks a batch-norm forward's operands (the plain and the
// fused op alike) and returns x's N, C and H*W.
func (b *Backend) checkBNForward(op string, y, x, gamma, beta, runMean, runVar *kernels.Tensor) (n, c, hw int) {
	b.owns(op, y, x, gamma, beta, runMean, runVar)
	n, c, hw = bnDims(op, x)
	needShape(op, "y", y, x.Shape...)
	for _, t := range []*kernels.Tensor{gamma, beta, runMean, runVar} {
		needShape(op, "parameter/statistic", t, c)
	}
	needF32(op, gamma, beta, runMean, runVar)
	return n, c, hw
}

// checkBNSaved checks the batch statistics a training forward saves.
func (b *Backend) checkBNSaved(op string, saveMean, saveInvStd *kernels.Tensor, c int) {
	b.owns(op, saveMean, saveInvStd)
	needShape(op, "saveMean", saveMean, c)
	needShape(op, "saveInvStd", saveInvStd, c)
	needF32(op, saveMean, saveInvStd)
}

// checkBNBackward checks a batch-norm backward's operands (dx may be nil)
// and returns x's N, C and H*W.
func (b *Backend) checkBNBackward(op string, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd *kernels.Tensor) (n, c, hw int) {
	b.owns(op, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd)
	n, c, hw = bnDims(op, x)
	needShape(op, "dy", dy, x.Shape...)
	if dx != nil {
		needShape(op, "dx", dx, x.Shape...)
	}
	for _, t := range []*kernels.Tensor{dgamma, dbeta, gamma, saveMean, saveInvStd} {
		needShape(op, "parameter/statistic", t, c)
	}
	needF32(op, dgamma, dbeta, gamma, saveMean, saveInvStd)
	return n, c, hw
}

// optional is an optional tensor's address and dtype code as a kernel
// takes them: 0 and 0 for none.
func optional(t *kernels.Tensor) (uintptr, int) {
	if t == nil {
		return 0, 0
	}
	return t.Dev, int(t.DType)
}

func (b *Backend) BatchNormForward(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd *kernels.Tensor, training bool, momentum, eps float32) {
	defer b.enter("BatchNormForward", x)()
	op := "BatchNormForward"
	n, c, hw := b.checkBNForward(op, y, x, gamma, beta, runMean, runVar)
	if x.Len() == 0 {
		return
	}
	v := bnVec(hw, y, x)
	if !training {
		b.args.reset().ptr(y.Dev).i32(int(y.DType)).ptr(x.Dev).i32(int(x.DType)).ptr(gamma.Dev).ptr(beta.Dev).
			ptr(runMean.Dev).ptr(runVar.Dev).i32(n).i32(c).i32(hw).f32(eps).i32(v)
		b.launch("bn_fwd_eval", b.gridFor(x.Len()/v), 1, 1, 256)
		return
	}
	b.checkBNSaved(op, saveMean, saveInvStd, c)
	b.args.reset().ptr(y.Dev).i32(int(y.DType)).ptr(x.Dev).i32(int(x.DType)).ptr(gamma.Dev).ptr(beta.Dev).
		ptr(runMean.Dev).ptr(runVar.Dev).ptr(saveMean.Dev).ptr(saveInvStd.Dev).i32(n).i32(c).i32(hw).f32(momentum).f32(eps).i32(v)
	b.launch("bn_fwd_train", c, 1, 1, bnThreads(n*hw/v))
}

func (b *Backend) BatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd *kernels.Tensor) {
	defer b.enter("BatchNormBackward", dy)()
	op := "BatchNormBackward"
	n, c, hw := b.checkBNBackward(op, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd)
	if x.Len() == 0 {
		return
	}
	v := bnVec(hw, dx, dy, x)
	dxp, dxt := optional(dx)
	b.args.reset().ptr(dxp).i32(dxt).ptr(dy.Dev).i32(int(dy.DType)).ptr(x.Dev).i32(int(x.DType)).ptr(gamma.Dev).
		ptr(saveMean.Dev).ptr(saveInvStd.Dev).ptr(dgamma.Dev).ptr(dbeta.Dev).i32(n).i32(c).i32(hw).i32(v)
	b.launch("bn_bwd", c, 1, 1, bnThreads(n*hw/v))
}
