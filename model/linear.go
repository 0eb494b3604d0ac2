package model

import "resnetlab/kernels"

// Linear is nn.Linear(in, out) with bias.
type Linear struct {
	name         string
	be           kernels.Backend
	hooks        *hookSlot
	In, Out      int
	Weight, Bias *Param
	x, y, dx     *kernels.Tensor
}

// NewLinear allocates a zero weight [out,in] and bias [out].
func NewLinear(be kernels.Backend, name string, dt kernels.DType, in, out int) *Linear {
	return &Linear{
		name: name, be: be, In: in, Out: out,
		Weight: newParam(be, name+".weight", dt, out, in),
		Bias:   newParam(be, name+".bias", dt, out),
	}
}

func (l *Linear) Name() string         { return l.name }
func (l *Linear) Params() []*Param     { return []*Param{l.Weight, l.Bias} }
func (l *Linear) setHooks(s *hookSlot) { l.hooks = s }

// Forward computes y [N,Out] = x W^T + b for x [N,In].
func (l *Linear) Forward(x *kernels.Tensor, train bool) *kernels.Tensor {
	l.hooks.preF(l)
	y := ensure(l.be, &l.y, x.DType, x.Shape[0], l.Out)
	l.be.LinearForward(y, x, l.Weight.W, l.Bias.W)
	l.x = x
	l.hooks.postF(l)
	return y
}

// Backward writes dW, db and returns dx.
func (l *Linear) Backward(dy *kernels.Tensor) *kernels.Tensor {
	l.hooks.preB(l)
	dx := ensureLike(l.be, &l.dx, l.x)
	l.be.LinearBackward(dx, l.Weight.G, l.Bias.G, dy, l.x, l.Weight.W)
	l.hooks.postB(l)
	return dx
}

func (l *Linear) freeActs() {
	release(l.be, &l.y)
	release(l.be, &l.dx)
	l.x = nil
}
