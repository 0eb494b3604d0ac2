package kernels

import "fmt"

// DType is a tensor's storage type.
type DType uint8

const (
	F32 DType = iota
	F16
	BF16
)

func (d DType) String() string {
	switch d {
	case F32:
		return "fp32"
	case F16:
		return "fp16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the number of bytes one element occupies on a device.
func (d DType) Size() int {
	if d == F32 {
		return 4
	}
	return 2
}

// ParseDType maps "fp32"/"fp16"/"bf16" to a DType.
func ParseDType(s string) (DType, error) {
	switch s {
	case "fp32":
		return F32, nil
	case "fp16":
		return F16, nil
	case "bf16":
		return BF16, nil
	}
	return F32, fmt.Errorf("unknown precision %q (want fp32, fp16 or bf16)", s)
}

// Category says what a tensor's memory is for; backends account bytes per
// category so the TUI memory pane and Gemini's tracer can read them.
type Category uint8

const (
	CatParams Category = iota
	CatGrads
	CatOptState
	CatActivations
	CatWorkspace
	CatData
	NumCategories
)

var categoryNames = [...]string{"params", "grads", "optimizer", "activations", "workspace", "data"}

func (c Category) String() string {
	if int(c) < len(categoryNames) {
		return categoryNames[c]
	}
	return fmt.Sprintf("category(%d)", uint8(c))
}

// Tensor is a dense array owned by one Backend. The CPU backend keeps its
// elements in Host; a device backend keeps a device pointer in Dev and leaves
// Host nil. Code outside a backend moves data only through Upload/Download.
type Tensor struct {
	Shape []int
	DType DType
	Cat   Category
	Host  []float32 // CPU backend storage
	Dev   uintptr   // device backend storage (device pointer)
	Owner Backend
}

// Len is the number of elements.
func (t *Tensor) Len() int { return NumElems(t.Shape) }

// Bytes is the storage size on a device.
func (t *Tensor) Bytes() int64 { return int64(t.Len()) * int64(t.DType.Size()) }

func (t *Tensor) String() string { return fmt.Sprintf("Tensor%v(%s,%s)", t.Shape, t.DType, t.Cat) }

// NumElems is the product of a shape's dimensions.
func NumElems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// ConvParams describes a 2-D convolution without bias (ResNet uses none).
// Input x [N,C,H,W], weight w [K,C,R,S], output y [N,K,P,Q] with
// P = (H+2*Pad-R)/Stride+1, Q = (W+2*Pad-S)/Stride+1.
type ConvParams struct {
	Stride, Pad int
}

// OutSize is the output extent of a convolution or pooling window.
func OutSize(in, k, stride, pad int) int { return (in+2*pad-k)/stride + 1 }

// PoolParams describes a max-pool window (ResNet: 3x3, stride 2, pad 1).
type PoolParams struct {
	K, Stride, Pad int
}

// AdamParams are the hyper-parameters of one Adam(W) step, exactly as
// ColossalAI's HybridAdam with adamw_mode (decoupled weight decay) and bias
// correction: m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
// p -= lr*(m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + lr*wd*p.
// Gradients are multiplied by GradScale first (1/lossScale for mixed precision).
type AdamParams struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int // 1-based step count t
	GradScale                          float32
}

// MemStats is a backend's memory accounting: bytes in use and the peak,
// per category, since the last ResetPeak.
type MemStats struct {
	InUse [NumCategories]int64
	Peak  [NumCategories]int64
	// TotalPeak is the peak of the sum over categories (not the sum of peaks).
	TotalPeak int64
	// Capacity is the device's memory size, 0 for host memory.
	Capacity int64
}

// Total is the bytes in use over all categories.
func (m MemStats) Total() int64 {
	var s int64
	for _, b := range m.InUse {
		s += b
	}
	return s
}

// Backend is a compute device. A Backend is used by one goroutine (one rank)
// at a time; ops are issued in order (device backends may run them
// asynchronously on their stream: Sync waits for all of them).
type Backend interface {
	Name() string   // "cpu" or "cuda"
	Device() string // human-readable device name, e.g. "NVIDIA H200 #0"

	// Memory. New returns a zero-filled tensor.
	New(cat Category, dt DType, shape ...int) *Tensor
	Free(t *Tensor)
	Upload(dst *Tensor, src []float32)   // host float32 -> tensor (rounded to dst.DType)
	Download(src *Tensor, dst []float32) // tensor -> host float32
	Copy(dst, src *Tensor)               // same length; converts dtype
	Fill(t *Tensor, v float32)
	Sync() error
	MemStats() MemStats
	ResetPeak()

	// Convolution (no bias). Backward writes dx (skipped if nil) and dw.
	Conv2dForward(y, x, w *Tensor, p ConvParams)
	Conv2dBackward(dx, dw, dy, x, w *Tensor, p ConvParams)

	// Batch norm over N,H,W per channel. Training uses batch statistics,
	// saves mean and 1/sqrt(var+eps) for backward, and updates the running
	// statistics: run = (1-momentum)*run + momentum*batch, with the unbiased
	// batch variance for runVar (as PyTorch). Eval uses the running stats and
	// ignores saveMean/saveInvStd. gamma, beta and the stats are fp32.
	BatchNormForward(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd *Tensor, training bool, momentum, eps float32)
	BatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd *Tensor)

	// Element-wise. y may alias x (or a).
	ReLUForward(y, x *Tensor)
	ReLUBackward(dx, dy, y *Tensor) // dx = dy * (y > 0)
	Add(y, a, b *Tensor)            // y = a + b
	Scale(t *Tensor, s float32)     // t *= s

	// Pooling. MaxPoolBackward recomputes the argmax from x (first max wins).
	MaxPoolForward(y, x *Tensor, p PoolParams)
	MaxPoolBackward(dx, dy, x *Tensor, p PoolParams)
	GlobalAvgPoolForward(y, x *Tensor) // x [N,C,H,W] -> y [N,C]
	GlobalAvgPoolBackward(dx, dy *Tensor)

	// Fully connected: y [N,O] = x [N,I] * w[O,I]^T + b[O].
	LinearForward(y, x, w, b *Tensor)
	LinearBackward(dx, dw, db, dy, x, w *Tensor)

	// SoftmaxCrossEntropy computes the mean loss over the batch into
	// loss [1] and dlogits = (softmax(logits) - onehot(labels)) * scale / N.
	// labels [N] hold class indices as float32. dlogits may be nil (eval).
	SoftmaxCrossEntropy(loss, dlogits, logits, labels *Tensor, scale float32)

	// AdamStep updates every params[i] from grads[i] with state m[i], v[i]
	// (fp32) in one fused multi-tensor pass.
	AdamStep(params, grads, m, v []*Tensor, hp AdamParams)
	// NonFinite reports whether any element of any tensor is inf or NaN.
	NonFinite(ts []*Tensor) bool
}

// View returns a tensor sharing t's storage from element off on, with the
// given shape (which must fit). Views let a flat buffer (DDP's gradient
// buckets, ZeRO's shards, Gemini's chunks) back many parameters. A view is
// never passed to Free: only its base is freed.
func View(t *Tensor, off int, shape ...int) *Tensor {
	n := NumElems(shape)
	if off < 0 || off+n > t.Len() {
		panic(fmt.Sprintf("kernels.View: [%d,%d) out of range of %v", off, off+n, t))
	}
	v := &Tensor{Shape: append([]int(nil), shape...), DType: t.DType, Cat: t.Cat, Owner: t.Owner}
	if t.Host != nil {
		v.Host = t.Host[off : off+n : off+n]
	}
	if t.Dev != 0 {
		v.Dev = t.Dev + uintptr(off*t.DType.Size())
	}
	return v
}

// Fence marks a point in one backend's stream of ops (a CUDA event; 0 on
// backends whose ops complete before they return).
type Fence uintptr

// Peer is the optional interface of backends whose ranks in one process
// exchange tensors directly, without staging through host memory
// (comm.DeviceComm). Several backends of one kind may live in a process,
// one per rank, on the same device (sharing its context) or on different
// devices; each issues ops on its own stream.
type Peer interface {
	Backend
	// CopyPeer copies src into dst (same length and dtype, no conversion),
	// issued on this backend's stream. One of the two belongs to this
	// backend; the other may belong to another backend of the same kind in
	// this process. The caller orders the copy against the other backend's
	// ops with fences.
	CopyPeer(dst, src *Tensor)
	// NewFence makes a fence of this backend; FreeFence releases it.
	NewFence() Fence
	FreeFence(f Fence)
	// Signal sets f (one of this backend's fences) to the ops issued on this
	// backend so far; f is done once they are.
	Signal(f Fence)
	// WaitFence makes the ops issued on this backend from now on wait until
	// f, a fence of any backend of this kind, is done as last signalled. It
	// does not block the caller.
	WaitFence(f Fence)
}
