package comm

import (
	"fmt"

	"resnetlab/kernels"
)

// NCCLTensorComm is the DeviceCommunicator for device-backend tensors
// (Tensor.Dev): NCCL collectives enqueued on the rank's stream.
type NCCLTensorComm struct {
	C      *NCCLComm
	Stream uintptr // the rank backend's CUstream (0: the legacy default stream)
	// Bind, when set, is called around every NCCL call and returns the
	// function that undoes it: NCCL acts on the CUDA context current on the
	// calling thread, so the rank's context must be current (and the
	// goroutine locked to its thread) for the duration of the call.
	Bind func() (release func())

	be      kernels.Backend
	scratch *kernels.Tensor // one fp32 element for Barrier
}

// OnStream returns the tensor communicator that enqueues on stream.
// Barrier needs ForBackend's scratch element and fails without it.
func (c *NCCLComm) OnStream(stream uintptr) *NCCLTensorComm {
	return &NCCLTensorComm{C: c, Stream: stream}
}

// streamBackend is what NCCL needs of a device backend
// (kernels/cuda.Backend has it).
type streamBackend interface {
	kernels.Backend
	Stream() uintptr
	Bind() (release func())
}

// ForBackend returns the tensor communicator for rank tensors of be: NCCL
// calls on be's stream with be's context bound, and a one-element scratch
// tensor of be for Barrier (Free gives it back).
func (c *NCCLComm) ForBackend(be kernels.Backend) (*NCCLTensorComm, error) {
	sb, ok := be.(streamBackend)
	if !ok {
		return nil, fmt.Errorf("parallel: NCCL needs a CUDA backend with a stream, not %s", be.Name())
	}
	n := c.OnStream(sb.Stream())
	n.Bind, n.be = sb.Bind, be
	n.scratch = be.New(kernels.CatWorkspace, kernels.F32, 1)
	return n, nil
}

// Free releases ForBackend's scratch tensor (not the NCCL communicator).
func (n *NCCLTensorComm) Free() {
	if n.be != nil && n.scratch != nil {
		n.be.Free(n.scratch)
		n.scratch = nil
	}
}

func (n *NCCLTensorComm) bind() func() {
	if n.Bind == nil {
		return func() {}
	}
	return n.Bind()
}

// Barrier is an all-reduce of one element: NCCL kernels of every rank
// meet, so ops queued after it on any rank's stream follow the ops every
// rank queued before it. The host does not wait.
func (n *NCCLTensorComm) Barrier() error {
	if n.scratch == nil {
		return fmt.Errorf("parallel: NCCL Barrier needs a scratch element: make the comm with ForBackend")
	}
	return n.AllReduce(n.scratch, Sum)
}

func (n *NCCLTensorComm) Rank() int      { return n.C.rank }
func (n *NCCLTensorComm) WorldSize() int { return n.C.world }

func (n *NCCLTensorComm) AllReduce(t *kernels.Tensor, op Op) error {
	defer n.bind()()
	dt, err := deviceTensors("AllReduce", t)
	if err != nil {
		return err
	}
	return n.C.AllReduce(t.Dev, t.Dev, t.Len(), dt, op, n.Stream)
}

func (n *NCCLTensorComm) ReduceScatter(dst, src *kernels.Tensor, op Op) error {
	defer n.bind()()
	dt, err := deviceTensors("ReduceScatter", dst, src)
	if err != nil {
		return err
	}
	if src.Len() != n.C.world*dst.Len() {
		return fmt.Errorf("parallel: ReduceScatter: src %v has %d elements, want world size %d x dst's %d",
			src, src.Len(), n.C.world, dst.Len())
	}
	return n.C.ReduceScatter(src.Dev, dst.Dev, dst.Len(), dt, op, n.Stream)
}

func (n *NCCLTensorComm) AllGather(dst, src *kernels.Tensor) error {
	defer n.bind()()
	dt, err := deviceTensors("AllGather", dst, src)
	if err != nil {
		return err
	}
	if dst.Len() != n.C.world*src.Len() {
		return fmt.Errorf("parallel: AllGather: dst %v has %d elements, want world size %d x src's %d",
			dst, dst.Len(), n.C.world, src.Len())
	}
	return n.C.AllGather(src.Dev, dst.Dev, src.Len(), dt, n.Stream)
}

func (n *NCCLTensorComm) Broadcast(t *kernels.Tensor, root int) error {
	defer n.bind()()
	dt, err := deviceTensors("Broadcast", t)
	if err != nil {
		return err
	}
	return n.C.Broadcast(t.Dev, t.Dev, t.Len(), dt, root, n.Stream)
}

// deviceTensors checks that the tensors live on a device and share a dtype,
// and returns that dtype as NCCL's.
func deviceTensors(name string, ts ...*kernels.Tensor) (NCCLDataType, error) {
	for _, t := range ts {
		if t == nil {
			return 0, fmt.Errorf("parallel: %s: nil tensor", name)
		}
		if t.Dev == 0 && t.Len() > 0 {
			return 0, fmt.Errorf("parallel: %s: tensor %v has no device storage (a CPU tensor? use HostTensorComm)", name, t)
		}
		if t.DType != ts[0].DType {
			return 0, fmt.Errorf("parallel: %s: dtypes differ: %v and %v", name, ts[0], t)
		}
	}
	switch ts[0].DType {
	case kernels.F32:
		return NCCLFloat32, nil
	case kernels.F16:
		return NCCLFloat16, nil
	case kernels.BF16:
		return NCCLBfloat16, nil
	}
	return 0, fmt.Errorf("parallel: %s: no NCCL type for %v", name, ts[0].DType)
}
