package model

import (
	"fmt"

	"resnetlab/kernels"
)

// BasicBlock is torchvision's BasicBlock: conv3x3(stride)-bn-relu-conv3x3-bn,
// plus the identity or a 1x1/stride conv+bn downsample, add, relu.
type BasicBlock struct {
	name         string
	be           kernels.Backend
	Conv1, Conv2 *Conv2d
	BN1, BN2     *BatchNorm2d
	Relu1, Relu2 *ReLU
	DownConv     *Conv2d      // nil without downsample
	DownBN       *BatchNorm2d // nil without downsample
	// fused, set by Forward, holds the backend's fused BN+ReLU ops when
	// Forward used them (Backward must then too); out is then the block's
	// output, whose sign is the last ReLU's mask.
	fused kernels.FusedBN
	out   *kernels.Tensor
}

// NewBasicBlock builds a block named like "layer2.0"; a downsample is added
// when the stride or the channel count changes, as torchvision does.
func NewBasicBlock(be kernels.Backend, name string, dt kernels.DType, in, out, stride int) *BasicBlock {
	b := &BasicBlock{
		name:  name,
		be:    be,
		Conv1: NewConv2d(be, name+".conv1", dt, in, out, 3, stride, 1),
		BN1:   NewBatchNorm2d(be, name+".bn1", out),
		Relu1: NewReLU(be, name+".relu"),
		Conv2: NewConv2d(be, name+".conv2", dt, out, out, 3, 1, 1),
		BN2:   NewBatchNorm2d(be, name+".bn2", out),
		Relu2: NewReLU(be, name+".relu"),
	}
	if stride != 1 || in != out {
		b.DownConv = NewConv2d(be, name+".downsample.0", dt, in, out, 1, stride, 0)
		b.DownBN = NewBatchNorm2d(be, name+".downsample.1", out)
	}
	return b
}

func (b *BasicBlock) Name() string { return b.name }

// layers lists the parametrised layers in torchvision's registration order,
// which is also their forward order.
func (b *BasicBlock) layers() []Module {
	ls := []Module{b.Conv1, b.BN1, b.Conv2, b.BN2}
	if b.DownConv != nil {
		ls = append(ls, b.DownConv, b.DownBN)
	}
	return ls
}

// Params lists the block's parameters in state-dict order.
func (b *BasicBlock) Params() []*Param {
	var ps []*Param
	for _, l := range b.layers() {
		ps = append(ps, l.Params()...)
	}
	return ps
}

// Forward computes relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
// With a backend that fuses BN and ReLU (kernels.FusedBNOf) each ReLU, and
// the add before the last one, runs inside a BN op (forwardFused);
// otherwise the sum and the last ReLU are written in place into bn2's
// output buffer. Both give the same bits.
func (b *BasicBlock) Forward(x *kernels.Tensor, train bool) *kernels.Tensor {
	b.fused, b.out = kernels.FusedBNOf(b.be), nil
	if b.fused != nil {
		return b.forwardFused(x, train)
	}
	o := b.Conv1.Forward(x, train)
	o = b.BN1.Forward(o, train)
	o = b.Relu1.Forward(o, train)
	o = b.Conv2.Forward(o, train)
	o = b.BN2.Forward(o, train)
	id := x
	if b.DownConv != nil {
		id = b.DownConv.Forward(x, train)
		id = b.DownBN.Forward(id, train)
	}
	if !sameShape(o, id) {
		panic(fmt.Sprintf("model: %s: residual shape %v != main path %v", b.name, id.Shape, o.Shape))
	}
	b.be.Add(o, o, id)
	return b.Relu2.Forward(o, train)
}

// forwardFused is Forward with BN+ReLU fused. The layers run in the same
// order (so hooks see the same sequence): without a downsample bn2 adds the
// identity; with one, bn2 runs alone and the shortcut's BN adds bn2's
// output (x + y is y + x in IEEE arithmetic), so the sum exists only after
// the last BN of the block.
func (b *BasicBlock) forwardFused(x *kernels.Tensor, train bool) *kernels.Tensor {
	f := b.fused
	o := b.Conv1.Forward(x, train)
	o = b.BN1.ForwardAct(f, o, nil, train)
	o = b.Conv2.Forward(o, train)
	if b.DownConv == nil {
		b.checkResidual(o, x)
		b.out = b.BN2.ForwardAct(f, o, x, train)
		return b.out
	}
	o = b.BN2.Forward(o, train)
	id := b.DownConv.Forward(x, train)
	b.checkResidual(o, id)
	b.out = b.DownBN.ForwardAct(f, id, o, train)
	return b.out
}

func (b *BasicBlock) checkResidual(o, id *kernels.Tensor) {
	if !sameShape(o, id) {
		panic(fmt.Sprintf("model: %s: residual shape %v != main path %v", b.name, id.Shape, o.Shape))
	}
}

// Backward returns dx; the sum of both paths' input gradients is written in
// place into conv1's dx buffer.
func (b *BasicBlock) Backward(dy *kernels.Tensor) *kernels.Tensor {
	if b.fused != nil {
		return b.backwardFused(dy)
	}
	ds := b.Relu2.Backward(dy)
	g := b.BN2.Backward(ds)
	g = b.Conv2.Backward(g)
	g = b.Relu1.Backward(g)
	g = b.BN1.Backward(g)
	g = b.Conv1.Backward(g)
	b.be.Add(g, g, b.shortcutBackward(ds))
	return g
}

// backwardFused is Backward after forwardFused, in the same layer order:
// bn2's backward applies the last ReLU's mask and hands the masked
// gradient to the shortcut too.
func (b *BasicBlock) backwardFused(dy *kernels.Tensor) *kernels.Tensor {
	f := b.fused
	g, ds := b.BN2.BackwardAct(f, dy, b.out, true)
	g = b.Conv2.Backward(g)
	g, _ = b.BN1.BackwardAct(f, g, b.BN1.y, false)
	g = b.Conv1.Backward(g)
	b.be.Add(g, g, b.shortcutBackward(ds))
	return g
}

// shortcutBackward is the gradient through the shortcut: ds itself, or
// through the downsampling BN and 1x1 convolution.
func (b *BasicBlock) shortcutBackward(ds *kernels.Tensor) *kernels.Tensor {
	if b.DownConv == nil {
		return ds
	}
	return b.DownConv.Backward(b.DownBN.Backward(ds))
}

func (b *BasicBlock) freeActs() {
	for _, f := range []interface{ freeActs() }{b.Conv1, b.BN1, b.Relu1, b.Conv2, b.BN2, b.Relu2} {
		f.freeActs()
	}
	if b.DownConv != nil {
		b.DownConv.freeActs()
		b.DownBN.freeActs()
	}
	b.out = nil
}

func sameShape(a, b *kernels.Tensor) bool {
	if len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	return true
}
