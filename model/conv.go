package model

import "resnetlab/kernels"

// Conv2d is nn.Conv2d(in, out, k, stride, pad, bias=False).
type Conv2d struct {
	name       string
	be         kernels.Backend
	hooks      *hookSlot
	In, Out, K int
	P          kernels.ConvParams
	Weight     *Param
	NeedDx     bool // compute the input gradient (false for the stem)
	x, y, dx   *kernels.Tensor
}

// NewConv2d allocates a zero weight named name+".weight" [out,in,k,k].
func NewConv2d(be kernels.Backend, name string, dt kernels.DType, in, out, k, stride, pad int) *Conv2d {
	return &Conv2d{
		name: name, be: be, In: in, Out: out, K: k,
		P:      kernels.ConvParams{Stride: stride, Pad: pad},
		Weight: newParam(be, name+".weight", dt, out, in, k, k),
		NeedDx: true,
	}
}

func (c *Conv2d) Name() string         { return c.name }
func (c *Conv2d) Params() []*Param     { return []*Param{c.Weight} }
func (c *Conv2d) setHooks(s *hookSlot) { c.hooks = s }

// Forward computes y = conv(x, W) for x [N,In,H,W].
func (c *Conv2d) Forward(x *kernels.Tensor, train bool) *kernels.Tensor {
	c.hooks.preF(c)
	n, h, w := x.Shape[0], x.Shape[2], x.Shape[3]
	p := kernels.OutSize(h, c.K, c.P.Stride, c.P.Pad)
	q := kernels.OutSize(w, c.K, c.P.Stride, c.P.Pad)
	y := ensure(c.be, &c.y, x.DType, n, c.Out, p, q)
	c.be.Conv2dForward(y, x, c.Weight.W, c.P)
	c.x = x
	c.hooks.postF(c)
	return y
}

// Backward writes the weight gradient and returns dx (nil when !NeedDx).
func (c *Conv2d) Backward(dy *kernels.Tensor) *kernels.Tensor {
	c.hooks.preB(c)
	var dx *kernels.Tensor
	if c.NeedDx {
		dx = ensureLike(c.be, &c.dx, c.x)
	}
	c.be.Conv2dBackward(dx, c.Weight.G, dy, c.x, c.Weight.W, c.P)
	c.hooks.postB(c)
	return dx
}

// freeActs releases the activation buffers.
func (c *Conv2d) freeActs() {
	release(c.be, &c.y)
	release(c.be, &c.dx)
	c.x = nil
}
