package model

import "resnetlab/kernels"

// Config selects the model's size, precision and initial weights.
type Config struct {
	Width      int           // channels of the first stage; 64 is torchvision's ResNet-18
	InChannels int           // image channels (3 for CIFAR-10, 1 or 3 for Fashion-MNIST)
	NumClasses int           // outputs of fc
	DType      kernels.DType // conv/fc weights and activations; BN params and stats stay fp32
	Seed       uint64        // identical seeds give identical initial parameters
}

// DefaultConfig is torchvision's resnet18(num_classes=10) in fp32.
func DefaultConfig() Config {
	return Config{Width: 64, InChannels: 3, NumClasses: 10, DType: kernels.F32}
}

// Param is one learnable tensor with its gradient; Name is its key in
// torchvision's state dict (e.g. "layer2.0.downsample.0.weight").
type Param struct {
	Name string
	W, G *kernels.Tensor
}

// Buffer is a non-learnable fp32 tensor of the state dict (BN running stats).
type Buffer struct {
	Name string
	T    *kernels.Tensor
}

// NamedTensor is one state-dict entry copied to host memory. Float entries
// use Data; integer entries (num_batches_tracked, optimizer step) use Int64.
// A scalar has an empty Shape and one element.
type NamedTensor struct {
	Name  string
	Shape []int
	Data  []float32
	Int64 []int64
}

// Module is one layer or block. Forward's result and Backward's result are
// buffers owned by the module: valid until the module's next call. Backward
// must follow the Forward whose input is still unchanged.
type Module interface {
	Name() string
	Forward(x *kernels.Tensor, train bool) *kernels.Tensor
	Backward(dy *kernels.Tensor) *kernels.Tensor
	Params() []*Param
}

// Hooks observe every parametrised module (conv, bn, linear) around its
// forward and backward; Gemini uses them to fetch and release chunks and to
// trace memory per operator.
type Hooks interface {
	PreForward(m Module)
	PostForward(m Module)
	PreBackward(m Module)
	PostBackward(m Module)
}

// hookSlot is shared by all layers of one model so SetHooks reaches them all.
type hookSlot struct{ h Hooks }

func (s *hookSlot) preF(m Module) {
	if s != nil && s.h != nil {
		s.h.PreForward(m)
	}
}

func (s *hookSlot) postF(m Module) {
	if s != nil && s.h != nil {
		s.h.PostForward(m)
	}
}

func (s *hookSlot) preB(m Module) {
	if s != nil && s.h != nil {
		s.h.PreBackward(m)
	}
}

func (s *hookSlot) postB(m Module) {
	if s != nil && s.h != nil {
		s.h.PostBackward(m)
	}
}
