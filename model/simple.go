package model

import "resnetlab/kernels"

// ReLU is nn.ReLU(inplace=True): Forward overwrites and returns its input,
// which is safe in ResNet because no layer's backward reads the tensor a
// ReLU overwrites (BN's backward reads BN's input, not its output).
type ReLU struct {
	name  string
	be    kernels.Backend
	y, dx *kernels.Tensor
}

// NewReLU returns an in-place ReLU.
func NewReLU(be kernels.Backend, name string) *ReLU { return &ReLU{name: name, be: be} }

func (r *ReLU) Name() string     { return r.name }
func (r *ReLU) Params() []*Param { return nil }

func (r *ReLU) Forward(x *kernels.Tensor, train bool) *kernels.Tensor {
	r.be.ReLUForward(x, x)
	r.y = x
	return x
}

func (r *ReLU) Backward(dy *kernels.Tensor) *kernels.Tensor {
	dx := ensureLike(r.be, &r.dx, r.y)
	r.be.ReLUBackward(dx, dy, r.y)
	return dx
}

func (r *ReLU) freeActs() {
	release(r.be, &r.dx)
	r.y = nil
}

// MaxPool2d is nn.MaxPool2d(k, stride, pad).
type MaxPool2d struct {
	name     string
	be       kernels.Backend
	P        kernels.PoolParams
	x, y, dx *kernels.Tensor
}

// NewMaxPool2d returns a max-pool layer.
func NewMaxPool2d(be kernels.Backend, name string, k, stride, pad int) *MaxPool2d {
	return &MaxPool2d{name: name, be: be, P: kernels.PoolParams{K: k, Stride: stride, Pad: pad}}
}

func (m *MaxPool2d) Name() string     { return m.name }
func (m *MaxPool2d) Params() []*Param { return nil }

func (m *MaxPool2d) Forward(x *kernels.Tensor, train bool) *kernels.Tensor {
	p := kernels.OutSize(x.Shape[2], m.P.K, m.P.Stride, m.P.Pad)
	q := kernels.OutSize(x.Shape[3], m.P.K, m.P.Stride, m.P.Pad)
	y := ensure(m.be, &m.y, x.DType, x.Shape[0], x.Shape[1], p, q)
	m.be.MaxPoolForward(y, x, m.P)
	m.x = x
	return y
}

func (m *MaxPool2d) Backward(dy *kernels.Tensor) *kernels.Tensor {
	dx := ensureLike(m.be, &m.dx, m.x)
	m.be.MaxPoolBackward(dx, dy, m.x, m.P)
	return dx
}

func (m *MaxPool2d) freeActs() {
	release(m.be, &m.y)
	release(m.be, &m.dx)
	m.x = nil
}

// AvgPool is nn.AdaptiveAvgPool2d((1,1)) followed by torch.flatten(x, 1):
// [N,C,H,W] -> [N,C].
type AvgPool struct {
	name     string
	be       kernels.Backend
	x, y, dx *kernels.Tensor
}

// NewAvgPool returns a global average pool.
func NewAvgPool(be kernels.Backend, name string) *AvgPool { return &AvgPool{name: name, be: be} }

func (a *AvgPool) Name() string     { return a.name }
func (a *AvgPool) Params() []*Param { return nil }

func (a *AvgPool) Forward(x *kernels.Tensor, train bool) *kernels.Tensor {
	y := ensure(a.be, &a.y, x.DType, x.Shape[0], x.Shape[1])
	a.be.GlobalAvgPoolForward(y, x)
	a.x = x
	return y
}

func (a *AvgPool) Backward(dy *kernels.Tensor) *kernels.Tensor {
	dx := ensureLike(a.be, &a.dx, a.x)
	a.be.GlobalAvgPoolBackward(dx, dy)
	return dx
}

func (a *AvgPool) freeActs() {
	release(a.be, &a.y)
	release(a.be, &a.dx)
	a.x = nil
}
