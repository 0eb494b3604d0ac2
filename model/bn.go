package model

import "resnetlab/kernels"

// BatchNorm constants of nn.BatchNorm2d's defaults.
const (
	BNEps      = 1e-5
	BNMomentum = 0.1
)

// BatchNorm2d is nn.BatchNorm2d(c): affine, tracking running statistics.
// Its parameters, gradients and statistics are fp32 whatever the model dtype.
type BatchNorm2d struct {
	name                 string
	be                   kernels.Backend
	hooks                *hookSlot
	C                    int
	Gamma, Beta          *Param
	RunMean, RunVar      *Buffer
	NumBatchesTracked    int64
	saveMean, saveInvStd *kernels.Tensor
	x, y, dx             *kernels.Tensor
	ds                   *kernels.Tensor // BackwardAct's masked gradient, when asked for
}

// NewBatchNorm2d allocates weight 1, bias 0, running_mean 0, running_var 1.
func NewBatchNorm2d(be kernels.Backend, name string, c int) *BatchNorm2d {
	b := &BatchNorm2d{
		name: name, be: be, C: c,
		Gamma:      newParam(be, name+".weight", kernels.F32, c),
		Beta:       newParam(be, name+".bias", kernels.F32, c),
		RunMean:    &Buffer{name + ".running_mean", be.New(kernels.CatParams, kernels.F32, c)},
		RunVar:     &Buffer{name + ".running_var", be.New(kernels.CatParams, kernels.F32, c)},
		saveMean:   be.New(kernels.CatActivations, kernels.F32, c),
		saveInvStd: be.New(kernels.CatActivations, kernels.F32, c),
	}
	b.reset()
	return b
}

// reset restores torchvision's initial state.
func (b *BatchNorm2d) reset() {
	b.be.Fill(b.Gamma.W, 1)
	b.be.Fill(b.Beta.W, 0)
	b.be.Fill(b.RunMean.T, 0)
	b.be.Fill(b.RunVar.T, 1)
	b.NumBatchesTracked = 0
}

func (b *BatchNorm2d) Name() string         { return b.name }
func (b *BatchNorm2d) Params() []*Param     { return []*Param{b.Gamma, b.Beta} }
func (b *BatchNorm2d) Buffers() []*Buffer   { return []*Buffer{b.RunMean, b.RunVar} }
func (b *BatchNorm2d) setHooks(s *hookSlot) { b.hooks = s }

// Forward normalises with batch statistics (train, updating the running
// ones) or with the running statistics (eval).
func (b *BatchNorm2d) Forward(x *kernels.Tensor, train bool) *kernels.Tensor {
	return b.forward(x, train, func(y *kernels.Tensor) {
		b.be.BatchNormForward(y, x, b.Gamma.W, b.Beta.W, b.RunMean.T, b.RunVar.T,
			b.saveMean, b.saveInvStd, train, BNMomentum, BNEps)
	})
}

// forward is the bookkeeping around a forward op (plain or fused) that
// writes this layer's output y: hooks, the output buffer, the batch count
// and the saved input.
func (b *BatchNorm2d) forward(x *kernels.Tensor, train bool, op func(y *kernels.Tensor)) *kernels.Tensor {
	b.hooks.preF(b)
	y := ensureLike(b.be, &b.y, x)
	op(y)
	if train {
		b.NumBatchesTracked++
	}
	b.x = x
	b.hooks.postF(b)
	return y
}

// Backward (train mode only) writes dgamma, dbeta and returns dx.
func (b *BatchNorm2d) Backward(dy *kernels.Tensor) *kernels.Tensor {
	return b.backward(func(dx *kernels.Tensor) {
		b.be.BatchNormBackward(dx, b.Gamma.G, b.Beta.G, dy, b.x, b.Gamma.W, b.saveMean, b.saveInvStd)
	})
}

// backward is the bookkeeping around a backward op (plain or fused) that
// writes this layer's input gradient dx: hooks and the dx buffer.
func (b *BatchNorm2d) backward(op func(dx *kernels.Tensor)) *kernels.Tensor {
	b.hooks.preB(b)
	dx := ensureLike(b.be, &b.dx, b.x)
	op(dx)
	b.hooks.postB(b)
	return dx
}

// ForwardAct is Forward followed by the ReLU of the layer after it (and,
// when res is not nil, the residual add before that ReLU), fused by f:
// relu(bn(x) + res), bit-identical to the separate ops. The result is this
// layer's output buffer.
func (b *BatchNorm2d) ForwardAct(f kernels.FusedBN, x, res *kernels.Tensor, train bool) *kernels.Tensor {
	return b.forward(x, train, func(y *kernels.Tensor) {
		f.BatchNormActForward(y, x, res, b.Gamma.W, b.Beta.W, b.RunMean.T, b.RunVar.T,
			b.saveMean, b.saveInvStd, train, BNMomentum, BNEps)
	})
}

// BackwardAct is the backward of the ReLU whose output was y (a ForwardAct
// result: this layer's or, in a downsampling block, the shortcut BN's)
// followed by this layer's Backward, fused by f. It returns dx and, when
// wantDs, the ReLU's input gradient (a buffer of this layer) for the
// residual shortcut.
func (b *BatchNorm2d) BackwardAct(f kernels.FusedBN, dy, y *kernels.Tensor, wantDs bool) (dx, ds *kernels.Tensor) {
	dx = b.backward(func(dx *kernels.Tensor) {
		if wantDs {
			ds = ensureLike(b.be, &b.ds, y)
		}
		f.BatchNormActBackward(dx, ds, b.Gamma.G, b.Beta.G, dy, y, b.x, b.Gamma.W, b.saveMean, b.saveInvStd)
	})
	return dx, ds
}

func (b *BatchNorm2d) freeActs() {
	release(b.be, &b.y)
	release(b.be, &b.dx)
	release(b.be, &b.ds)
	b.x = nil
}
