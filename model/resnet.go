package model

import (
	"fmt"

	"resnetlab/kernels"
)

// ResNet is torchvision's resnet18 (BasicBlock, layers [2,2,2,2]) with a
// width multiplier.
type ResNet struct {
	Cfg     Config
	be      kernels.Backend
	hooks   *hookSlot
	Conv1   *Conv2d
	BN1     *BatchNorm2d
	Relu    *ReLU
	MaxPool *MaxPool2d
	Blocks  []*BasicBlock // layer1.0, layer1.1, ..., layer4.1
	AvgPool *AvgPool
	FC      *Linear
	fused   kernels.FusedBN // the stem's fused BN+ReLU ops when the last Forward used them
	layers  []Module        // parametrised layers in state-dict (= forward) order
	params  []*Param
	owned   []*kernels.Tensor // parameter tensors allocated here, for Free
}

// NewResNet18 builds the model on be and initialises it as torchvision does
// from a PCG stream seeded with cfg.Seed.
func NewResNet18(be kernels.Backend, cfg Config) *ResNet {
	if cfg.Width <= 0 || cfg.InChannels <= 0 || cfg.NumClasses <= 0 {
		panic(fmt.Sprintf("model: invalid config %+v: width, in-channels and classes must be > 0", cfg))
	}
	w, dt := cfg.Width, cfg.DType
	m := &ResNet{Cfg: cfg, be: be, hooks: &hookSlot{}}
	m.Conv1 = NewConv2d(be, "conv1", dt, cfg.InChannels, w, 7, 2, 3)
	m.Conv1.NeedDx = false // nothing upstream of the stem needs a gradient
	m.BN1 = NewBatchNorm2d(be, "bn1", w)
	m.Relu = NewReLU(be, "relu")
	m.MaxPool = NewMaxPool2d(be, "maxpool", 3, 2, 1)
	in := w
	for stage := range 4 {
		out := w << stage
		stride := 2
		if stage == 0 {
			stride = 1
		}
		for i := range 2 {
			name := fmt.Sprintf("layer%d.%d", stage+1, i)
			m.Blocks = append(m.Blocks, NewBasicBlock(be, name, dt, in, out, stride))
			in, stride = out, 1
		}
	}
	m.AvgPool = NewAvgPool(be, "avgpool")
	m.FC = NewLinear(be, "fc", dt, in, cfg.NumClasses)
	m.collect()
	m.init()
	return m
}

// collect fills layers and params in torchvision's registration order and
// hands every parametrised layer the shared hook slot.
func (m *ResNet) collect() {
	m.layers = []Module{m.Conv1, m.BN1}
	for _, b := range m.Blocks {
		m.layers = append(m.layers, b.layers()...)
	}
	m.layers = append(m.layers, m.FC)
	for _, l := range m.layers {
		l.(interface{ setHooks(*hookSlot) }).setHooks(m.hooks)
		m.params = append(m.params, l.Params()...)
	}
	for _, p := range m.params {
		m.owned = append(m.owned, p.W, p.G)
	}
}

// Backend is the backend the model lives on.
func (m *ResNet) Backend() kernels.Backend { return m.be }

// Params lists every parameter in torchvision's state-dict order.
func (m *ResNet) Params() []*Param { return m.params }

// Layers lists the parametrised layers (conv, bn, fc) in forward order.
func (m *ResNet) Layers() []Module { return m.layers }

// Buffers lists BN running statistics in state-dict order.
func (m *ResNet) Buffers() []*Buffer {
	var bs []*Buffer
	for _, l := range m.layers {
		if bn, ok := l.(*BatchNorm2d); ok {
			bs = append(bs, bn.Buffers()...)
		}
	}
	return bs
}

// NumParams counts learnable scalars (11,181,642 for resnet18 with 10 classes).
func (m *ResNet) NumParams() int {
	n := 0
	for _, p := range m.params {
		n += p.W.Len()
	}
	return n
}

// SetHooks installs h around every conv, bn and fc (nil removes them).
func (m *ResNet) SetHooks(h Hooks) { m.hooks.h = h }

// Forward maps images x [N,InChannels,H,W] (model dtype) to logits
// [N,NumClasses]. x must stay unchanged until Backward. The returned tensor
// is reused by the next Forward.
func (m *ResNet) Forward(x *kernels.Tensor, train bool) *kernels.Tensor {
	if len(x.Shape) != 4 || x.Shape[1] != m.Cfg.InChannels || x.DType != m.Cfg.DType {
		panic(fmt.Sprintf("model: input %v, want [N,%d,H,W] %s", x, m.Cfg.InChannels, m.Cfg.DType))
	}
	o := m.Conv1.Forward(x, train)
	if m.fused = kernels.FusedBNOf(m.be); m.fused != nil {
		o = m.BN1.ForwardAct(m.fused, o, nil, train)
	} else {
		o = m.BN1.Forward(o, train)
		o = m.Relu.Forward(o, train)
	}
	o = m.MaxPool.Forward(o, train)
	for _, b := range m.Blocks {
		o = b.Forward(o, train)
	}
	o = m.AvgPool.Forward(o, train)
	return m.FC.Forward(o, train)
}

// Backward overwrites every Param.G with the gradient of the loss whose
// gradient w.r.t. the logits of the last train-mode Forward is dlogits.
func (m *ResNet) Backward(dlogits *kernels.Tensor) {
	m.Conv1.NeedDx = false
	m.backward(dlogits)
}

// BackwardInput is Backward that also returns the gradient w.r.t. the input
// images (a buffer owned by the model, reused by the next call).
func (m *ResNet) BackwardInput(dlogits *kernels.Tensor) *kernels.Tensor {
	m.Conv1.NeedDx = true
	return m.backward(dlogits)
}

func (m *ResNet) backward(dlogits *kernels.Tensor) *kernels.Tensor {
	g := m.FC.Backward(dlogits)
	g = m.AvgPool.Backward(g)
	for i := len(m.Blocks) - 1; i >= 0; i-- {
		g = m.Blocks[i].Backward(g)
	}
	g = m.MaxPool.Backward(g)
	if m.fused != nil {
		g, _ = m.BN1.BackwardAct(m.fused, g, m.BN1.y, false)
	} else {
		g = m.Relu.Backward(g)
		g = m.BN1.Backward(g)
	}
	return m.Conv1.Backward(g)
}

// FreeActivations releases every activation buffer (they are reallocated
// by the next Forward).
func (m *ResNet) FreeActivations() {
	m.Conv1.freeActs()
	m.BN1.freeActs()
	m.Relu.freeActs()
	m.MaxPool.freeActs()
	for _, b := range m.Blocks {
		b.freeActs()
	}
	m.AvgPool.freeActs()
	m.FC.freeActs()
}

// Free releases every tensor of the model. A parameter or gradient that a
// plugin rebound to other storage (e.g. a kernels.View of a flat buffer) is
// not freed here: the original tensor it replaced belongs to the rebinder.
func (m *ResNet) Free() {
	m.FreeActivations()
	for i, p := range m.params {
		if p.W == m.owned[2*i] {
			m.be.Free(p.W)
		}
		if p.G == m.owned[2*i+1] {
			m.be.Free(p.G)
		}
	}
	for _, l := range m.layers {
		if bn, ok := l.(*BatchNorm2d); ok {
			for _, t := range []*kernels.Tensor{bn.RunMean.T, bn.RunVar.T, bn.saveMean, bn.saveInvStd} {
				m.be.Free(t)
			}
		}
	}
}
