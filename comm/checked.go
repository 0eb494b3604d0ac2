package comm

import (
	"fmt"

	"resnetlab/kernels"
)

// CheckedComm runs each collective of a DeviceCommunicator (NCCL) only once
// every rank of an in-process Group has entered the same collective with
// the same arguments: a host barrier on the group first, microseconds per
// call. NCCL cannot tell that a peer rank has failed: its kernels would
// wait for the peer forever, and so would this rank at its next Sync. With
// the check, a failed rank aborts the group (as the runner does for every
// failing rank) and its peers return an error wrapping ErrAborted before
// they enqueue anything. Mismatched calls are reported on every rank, as
// the host collectives do, instead of corrupting data or hanging.
//
// Across processes the agreement goes through a ProcComm: one round trip
// to rank 0 per call, and a lost process ends its peers' calls the same way.
type CheckedComm struct {
	D      DeviceCommunicator
	agree1 agreer
}

var _ DeviceCommunicator = (*CheckedComm)(nil)

// NewCheckedComm wraps d, rank c.Rank() of an in-process Group or a ProcComm.
func NewCheckedComm(d DeviceCommunicator, c Communicator) (*CheckedComm, error) {
	var a agreer
	switch hc := c.(type) {
	case *hostComm:
		a = func(cl call) error { return hc.run(cl) }
	case *ProcComm:
		a = hc.agree
	default:
		return nil, fmt.Errorf("parallel: CheckedComm needs a communicator of an in-process Group or a ProcComm, not %T", c)
	}
	if d.Rank() != c.Rank() || d.WorldSize() != c.WorldSize() {
		return nil, fmt.Errorf("parallel: CheckedComm: communicator is rank %d of %d, host comm rank %d of %d",
			d.Rank(), d.WorldSize(), c.Rank(), c.WorldSize())
	}
	return &CheckedComm{D: d, agree1: a}, nil
}

func (k *CheckedComm) Rank() int      { return k.D.Rank() }
func (k *CheckedComm) WorldSize() int { return k.D.WorldSize() }

// agree is the host half: publish, check, barrier (no data moves).
func (k *CheckedComm) agree(cl call, t *kernels.Tensor) error {
	cl.dev = true
	if t != nil {
		cl.dt = t.DType
	}
	return k.agree1(cl)
}

// agreer runs a call's host agreement: publish, check, barrier.
type agreer func(cl call) error

func (k *CheckedComm) AllReduce(t *kernels.Tensor, op Op) error {
	if t == nil {
		return fmt.Errorf("parallel: AllReduce: nil tensor")
	}
	if err := k.agree(call{kind: kAllReduce, op: op, n: t.Len(), bad: opCheck(op)}, t); err != nil {
		return err
	}
	return k.D.AllReduce(t, op)
}

func (k *CheckedComm) ReduceScatter(dst, src *kernels.Tensor, op Op) error {
	if dst == nil || src == nil {
		return fmt.Errorf("parallel: ReduceScatter: nil tensor")
	}
	if err := k.agree(call{kind: kReduceScatter, op: op, n: dst.Len(), bad: opCheck(op)}, dst); err != nil {
		return err
	}
	return k.D.ReduceScatter(dst, src, op)
}

func (k *CheckedComm) AllGather(dst, src *kernels.Tensor) error {
	if dst == nil || src == nil {
		return fmt.Errorf("parallel: AllGather: nil tensor")
	}
	if err := k.agree(call{kind: kAllGather, n: src.Len()}, src); err != nil {
		return err
	}
	return k.D.AllGather(dst, src)
}

func (k *CheckedComm) Broadcast(t *kernels.Tensor, root int) error {
	if t == nil {
		return fmt.Errorf("parallel: Broadcast: nil tensor")
	}
	if err := k.agree(call{kind: kBroadcast, root: root, n: t.Len()}, t); err != nil {
		return err
	}
	return k.D.Broadcast(t, root)
}

func (k *CheckedComm) Barrier() error {
	if err := k.agree(call{kind: kBarrier}, nil); err != nil {
		return err
	}
	return k.D.Barrier()
}
