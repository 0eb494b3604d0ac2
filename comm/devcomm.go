package comm

import (
	"fmt"

	"resnetlab/kernels"
)

// DeviceComm is the DeviceCommunicator for ranks of one process whose
// backends implement kernels.Peer (kernels/cuda: several ranks on one GPU,
// or one rank per GPU without NCCL; kernels/cpu: the same code on host
// memory, which is how CI tests it). Data never visits host memory: a rank
// copies its peers' blocks with device copies (Peer.CopyPeer) and sums
// them with the backend's own kernels (Copy, Add, Scale).
//
// # Order of summation
//
// As in the host Group, block r of a buffer is reduced by rank r, directly
// in rank order, into an fp32 accumulator:
//
//	acc = x0 ; acc = acc + x1 ; ... ; acc = acc + x(W-1)   // Sum
//	acc = acc * float32(1/W)                               // Avg
//
// then rounded to the tensor's dtype. Sums are therefore bit-identical to
// HostTensorComm's. Avg multiplies by the rounded reciprocal (Scale is the
// kernel there is) where the host divides: the same bits whenever W is a
// power of two (1, 2, 4, 8), within one rounding step otherwise. Either
// way every rank gets the same bits, run after run.
//
// # Ordering between ranks' streams
//
// Each rank's ops run asynchronously on its own stream. A collective is
// two host barriers (the Group's) and two fences (CUDA events) per rank:
//
//  1. the rank signals ready (its ops producing the inputs) and publishes
//     its call; barrier;
//  2. its stream waits on every peer's ready, then it enqueues its part
//     (copies of peers' blocks, the reduction of its own block, and for
//     AllReduce the copies of the result into every peer's buffer) and
//     signals done; barrier;
//  3. its stream waits on every peer's done: its outputs are complete and
//     no peer still reads its inputs, so ops issued after the call may
//     overwrite them (the caller's next bucket, an allocator reusing the
//     block).
//
// The host never waits for the device: waits are stream-side
// (cuStreamWaitEvent), and a fence is waited on only after the barrier
// that follows its signal, so no stream can wait for work that is never
// issued. Events rather than stream syncs keep both ranks' kernels queued
// back to back on the GPU; a sync would drain the queue at every bucket.
// A fence is signalled again only after every peer has passed the wait on
// its previous signal (the barriers in between guarantee it).
//
// Like every DeviceCommunicator, calls are issued from the rank's own
// goroutine (device backends are bound to it), and results are visible to
// later ops on the rank's stream and to the host after Sync.
type DeviceComm struct {
	c           *hostComm
	be          kernels.Peer
	ready, done kernels.Fence
	acc         *kernels.Tensor                   // fp32 accumulator, grown on demand
	land        map[kernels.DType]*kernels.Tensor // peers' blocks land here
}

var _ DeviceCommunicator = (*DeviceComm)(nil)

// NewDeviceComm makes rank c.Rank()'s device communicator; c must be a
// communicator of an in-process Group (Group.Comm, Coordinator.Comm) and
// every rank of the group must use a DeviceComm for its device collectives.
func NewDeviceComm(be kernels.Backend, c Communicator) (*DeviceComm, error) {
	p, ok := be.(kernels.Peer)
	if !ok {
		return nil, fmt.Errorf("parallel: the %s backend cannot copy between ranks (it lacks kernels.Peer): use StagedComm", be.Name())
	}
	hc, ok := c.(*hostComm)
	if !ok {
		return nil, fmt.Errorf("parallel: a DeviceComm needs a communicator of an in-process Group, not %T", c)
	}
	return &DeviceComm{c: hc, be: p, ready: p.NewFence(), done: p.NewFence(),
		land: map[kernels.DType]*kernels.Tensor{}}, nil
}

func (d *DeviceComm) Rank() int      { return d.c.rank }
func (d *DeviceComm) WorldSize() int { return d.c.g.world }

// Free releases the scratch tensors and the fences. It is collective:
// every rank calls it after its last collective, and it waits for the
// others (a barrier), since a peer may still be about to wait on this
// rank's fences. In an aborted group the fences are left to the backend's
// context, which releases them when it closes.
func (d *DeviceComm) Free() {
	err := d.c.run(call{kind: kFree, dev: true})
	d.be.Free(d.acc)
	for _, t := range d.land {
		d.be.Free(t)
	}
	d.acc, d.land = nil, nil
	if err == nil {
		d.be.FreeFence(d.ready)
		d.be.FreeFence(d.done)
		d.ready, d.done = 0, 0
	}
}

// collective runs one collective: publish cl after signalling ready, then
// work on the calls of every rank (see the type's comment for the steps).
func (d *DeviceComm) collective(cl call, work func(calls []call)) error {
	cl.dev, cl.dc = true, d
	d.be.Signal(d.ready)
	var done []kernels.Fence // peers' done fences, once step 2 ran: then step 3 must run too
	err := d.c.run(cl, func(calls []call) {
		done = make([]kernels.Fence, len(calls))
		for k, c := range calls {
			if k != d.c.rank {
				d.be.WaitFence(c.dc.ready)
				done[k] = c.dc.done // read now: after the last barrier a peer may move on
			}
		}
		work(calls)
		d.be.Signal(d.done)
	})
	// Even when a later barrier failed (an aborted group), peers may still
	// be copying from this rank's tensors: order this stream after them.
	for k, f := range done {
		if k != d.c.rank {
			d.be.WaitFence(f)
		}
	}
	return err
}

// newCall checks the tensors and describes the call. Problems go into bad,
// which every rank then reports (see check).
func (d *DeviceComm) newCall(k kind, op Op, n int, dst, src *kernels.Tensor) call {
	cl := call{kind: k, op: op, n: n, tdst: dst, tsrc: src}
	if k == kAllReduce || k == kReduceScatter {
		cl.bad = opCheck(op)
	}
	for _, t := range []*kernels.Tensor{dst, src} {
		switch {
		case t == nil:
		case t.Owner != kernels.Backend(d.be):
			cl.bad = fmt.Sprintf("tensor %v does not belong to this rank's %s backend", t, d.be.Name())
		case t.DType != dst.DType:
			cl.bad = fmt.Sprintf("dtypes differ: %v and %v", dst, t)
		}
	}
	if dst != nil {
		cl.dt = dst.DType
	}
	return cl
}

func (d *DeviceComm) AllReduce(t *kernels.Tensor, op Op) error {
	if t == nil {
		return fmt.Errorf("parallel: AllReduce: nil tensor")
	}
	n, r := t.Len(), d.c.rank
	lo, hi := block(n, d.c.g.world, r)
	return d.collective(d.newCall(kAllReduce, op, n, t, nil), func(calls []call) {
		own := kernels.View(t, lo, hi-lo)
		d.reduceBlock(own, calls, func(c call) *kernels.Tensor { return c.tdst }, lo, op)
		for k, c := range calls {
			if k != r && hi > lo {
				d.be.CopyPeer(kernels.View(c.tdst, lo, hi-lo), own)
			}
		}
	})
}

func (d *DeviceComm) ReduceScatter(dst, src *kernels.Tensor, op Op) error {
	if dst == nil || src == nil {
		return fmt.Errorf("parallel: ReduceScatter: nil tensor")
	}
	w, m := d.c.g.world, dst.Len()
	cl := d.newCall(kReduceScatter, op, m, dst, src)
	if src.Len() != w*m {
		cl.bad = fmt.Sprintf("ReduceScatter src has %d elements, want world size %d x len(dst) %d = %d", src.Len(), w, m, w*m)
	}
	return d.collective(cl, func(calls []call) {
		d.reduceBlock(dst, calls, func(c call) *kernels.Tensor { return c.tsrc }, d.c.rank*m, op)
	})
}

func (d *DeviceComm) AllGather(dst, src *kernels.Tensor) error {
	if dst == nil || src == nil {
		return fmt.Errorf("parallel: AllGather: nil tensor")
	}
	w, n := d.c.g.world, src.Len()
	cl := d.newCall(kAllGather, Sum, n, dst, src)
	if dst.Len() != w*n {
		cl.bad = fmt.Sprintf("AllGather dst has %d elements, want world size %d x len(src) %d = %d", dst.Len(), w, n, w*n)
	}
	return d.collective(cl, func(calls []call) {
		if n == 0 {
			return
		}
		for k, c := range calls {
			out := kernels.View(dst, k*n, n)
			if k == d.c.rank {
				copyUnlessSame(d.be, out, src) // in place: src is block k already
			} else {
				d.be.CopyPeer(out, c.tsrc)
			}
		}
	})
}

func (d *DeviceComm) Broadcast(t *kernels.Tensor, root int) error {
	if t == nil {
		return fmt.Errorf("parallel: Broadcast: nil tensor")
	}
	cl := d.newCall(kBroadcast, Sum, t.Len(), t, nil)
	cl.root = root
	if root < 0 || root >= d.c.g.world {
		cl.bad = fmt.Sprintf("Broadcast root %d outside [0,%d)", root, d.c.g.world)
	}
	return d.collective(cl, func(calls []call) {
		if d.c.rank != root && t.Len() > 0 {
			d.be.CopyPeer(t, calls[root].tdst)
		}
	})
}

// Barrier returns once every rank has entered it; ops issued after it on
// any rank's stream run after the ops every rank issued before it.
func (d *DeviceComm) Barrier() error {
	return d.collective(call{kind: kBarrier}, func([]call) {})
}

// reduceBlock writes into out (this rank's, m elements) the rank-order
// reduction of elements [lo, lo+m) of every rank's tensor of(calls[k]).
// out may be that block of this rank's own tensor: it is written last.
func (d *DeviceComm) reduceBlock(out *kernels.Tensor, calls []call, of func(call) *kernels.Tensor, lo int, op Op) {
	m, w := out.Len(), len(calls)
	if m == 0 {
		return
	}
	if w == 1 { // Sum and Avg over one rank are the identity
		copyUnlessSame(d.be, out, kernels.View(of(calls[0]), lo, m))
		return
	}
	acc := d.scratch(&d.acc, kernels.F32, m)
	for k, c := range calls {
		x := kernels.View(of(c), lo, m)
		if k != d.c.rank {
			if k == 0 && x.DType == kernels.F32 { // straight into the accumulator
				d.be.CopyPeer(acc, x)
				continue
			}
			l := d.land[x.DType]
			y := d.scratch(&l, x.DType, m)
			d.land[x.DType] = l
			d.be.CopyPeer(y, x)
			x = y
		}
		if k == 0 {
			d.be.Copy(acc, x)
		} else {
			d.be.Add(acc, acc, x)
		}
	}
	if op == Avg {
		d.be.Scale(acc, 1/float32(w))
	}
	d.be.Copy(out, acc)
}

// scratch returns the first m elements of *t, reallocating it (dtype dt)
// when it is shorter. Stream order makes the old block's reuse safe.
func (d *DeviceComm) scratch(t **kernels.Tensor, dt kernels.DType, m int) *kernels.Tensor {
	if *t == nil || (*t).Len() < m {
		if *t != nil {
			d.be.Free(*t)
		}
		*t = d.be.New(kernels.CatWorkspace, dt, m)
	}
	return kernels.View(*t, 0, m)
}

// copyUnlessSame copies src into dst unless both are the same storage (an
// in-place call), which peers may be reading at this moment.
func copyUnlessSame(be kernels.Backend, dst, src *kernels.Tensor) {
	same := dst.DType == src.DType && dst.Len() == src.Len() &&
		(dst.Dev != 0 && dst.Dev == src.Dev ||
			len(dst.Host) > 0 && len(src.Host) > 0 && &dst.Host[0] == &src.Host[0])
	if !same {
		be.Copy(dst, src)
	}
}
