package comm

import (
	"fmt"

	"resnetlab/kernels"
)

// DeviceCommunicator runs collectives on tensors of one rank's backend.
// Element counts follow Communicator's rules. A device implementation
// (NCCL, or the CUDA backend's own peer-to-peer one) enqueues each
// collective on the rank's stream after the ops already issued there and
// returns at once; results are visible to ops issued later on that stream,
// and to the host after Backend.Sync. Tensors of fp16/bf16 are reduced in
// at least fp32 and stored rounded to their dtype. dst and src of one call
// must have the same dtype.
type DeviceCommunicator interface {
	Rank() int
	WorldSize() int
	AllReduce(t *kernels.Tensor, op Op) error
	ReduceScatter(dst, src *kernels.Tensor, op Op) error
	AllGather(dst, src *kernels.Tensor) error
	Broadcast(t *kernels.Tensor, root int) error
	// Barrier returns once every rank has entered it (NCCL: once it is
	// enqueued); ops issued after it on any rank run after the ops every
	// rank issued before it.
	Barrier() error
}

// HostTensorComm is the DeviceCommunicator for CPU-backend tensors (whose
// elements live in Tensor.Host): it runs the host Communicator on them, so
// it is synchronous and keeps the host reduction order.
type HostTensorComm struct{ C Communicator }

// NewHostTensorComm wraps c for CPU-backend tensors.
func NewHostTensorComm(c Communicator) *HostTensorComm { return &HostTensorComm{C: c} }

func (h *HostTensorComm) Rank() int      { return h.C.Rank() }
func (h *HostTensorComm) WorldSize() int { return h.C.WorldSize() }

func (h *HostTensorComm) AllReduce(t *kernels.Tensor, op Op) error {
	if err := hostTensors("AllReduce", t); err != nil {
		return err
	}
	err := h.C.AllReduce(t.Host, op)
	roundTo(t.DType, t.Host)
	return err
}

func (h *HostTensorComm) ReduceScatter(dst, src *kernels.Tensor, op Op) error {
	if err := hostTensors("ReduceScatter", dst, src); err != nil {
		return err
	}
	err := h.C.ReduceScatter(dst.Host, src.Host, op)
	roundTo(dst.DType, dst.Host)
	return err
}

func (h *HostTensorComm) AllGather(dst, src *kernels.Tensor) error {
	if err := hostTensors("AllGather", dst, src); err != nil {
		return err
	}
	return h.C.AllGather(dst.Host, src.Host)
}

func (h *HostTensorComm) Broadcast(t *kernels.Tensor, root int) error {
	if err := hostTensors("Broadcast", t); err != nil {
		return err
	}
	return h.C.Broadcast(t.Host, root)
}

func (h *HostTensorComm) Barrier() error { return h.C.Barrier() }

// hostTensors checks that the tensors hold host storage of their full
// length and share a dtype. A failing check returns before the collective,
// so the caller's peers then fail or wait like for any rank that errors out.
func hostTensors(name string, ts ...*kernels.Tensor) error {
	for _, t := range ts {
		if t == nil {
			return fmt.Errorf("parallel: %s: nil tensor", name)
		}
		if len(t.Host) != t.Len() {
			return fmt.Errorf("parallel: %s: tensor %v has %d host elements, want %d (is it a device tensor? use the device backend's communicator)",
				name, t, len(t.Host), t.Len())
		}
		if t.DType != ts[0].DType {
			return fmt.Errorf("parallel: %s: dtypes differ: %v and %v", name, ts[0], t)
		}
	}
	return nil
}

// roundTo rounds xs in place to dt exactly as the CPU backend stores
// fp16/bf16 tensors, so a reduced tensor keeps that invariant.
func roundTo(dt kernels.DType, xs []float32) {
	var round func(float32) float32
	switch dt {
	case kernels.F16:
		round = kernels.RoundF16
	case kernels.BF16:
		round = kernels.RoundBF16
	default:
		return
	}
	for i, v := range xs {
		xs[i] = round(v)
	}
}
