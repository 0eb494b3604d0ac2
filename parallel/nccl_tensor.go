package parallel

import (
	"fmt"

	"resnetlab/kernels"
)

// NCCLTensorComm is the DeviceCommunicator for device-backend tensors
// (Tensor.Dev): NCCL collectives enqueued on the rank's stream.
type NCCLTensorComm struct {
	C      *NCCLComm
	Stream uintptr // the rank backend's CUstream (0: the legacy default stream)
}

// OnStream returns the tensor communicator that enqueues on stream.
func (c *NCCLComm) OnStream(stream uintptr) *NCCLTensorComm {
	return &NCCLTensorComm{C: c, Stream: stream}
}

func (n *NCCLTensorComm) Rank() int      { return n.C.rank }
func (n *NCCLTensorComm) WorldSize() int { return n.C.world }

func (n *NCCLTensorComm) AllReduce(t *kernels.Tensor, op Op) error {
	dt, err := deviceTensors("AllReduce", t)
	if err != nil {
		return err
	}
	return n.C.AllReduce(t.Dev, t.Dev, t.Len(), dt, op, n.Stream)
}

func (n *NCCLTensorComm) ReduceScatter(dst, src *kernels.Tensor, op Op) error {
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
