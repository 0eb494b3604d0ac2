package comm

import (
	"fmt"
)

// NCCLComm is one rank's ncclComm_t.
type NCCLComm struct {
	lib         *NCCL
	h           uintptr
	rank, world int
}

// CommInitRank joins rank of a world-rank communicator. It blocks until all
// ranks have called it (one goroutine or process per rank), on the device
// current on the calling thread.
func (l *NCCL) CommInitRank(world int, id UniqueID, rank int) (*NCCLComm, error) {
	if rank < 0 || rank >= world {
		return nil, fmt.Errorf("nccl: CommInitRank: rank %d outside [0,%d)", rank, world)
	}
	c := &NCCLComm{lib: l, rank: rank, world: world}
	r := l.commInitRank(&c.h, int32(world), ncclUniqueID{B: id}, int32(rank))
	if err := l.check(fmt.Sprintf("ncclCommInitRank(rank %d of %d)", rank, world), r); err != nil {
		return nil, err
	}
	return c, nil
}

// CommInitAll makes one communicator per listed CUDA device in this
// process; comms[i] is rank i on devices[i].
func (l *NCCL) CommInitAll(devices []int) ([]*NCCLComm, error) {
	if len(devices) == 0 {
		return nil, fmt.Errorf("nccl: CommInitAll: no devices")
	}
	hs := make([]uintptr, len(devices))
	devs := make([]int32, len(devices))
	for i, d := range devices {
		devs[i] = int32(d)
	}
	r := l.commInitAll(&hs[0], int32(len(devs)), &devs[0])
	if err := l.check(fmt.Sprintf("ncclCommInitAll(devices %v)", devices), r); err != nil {
		return nil, err
	}
	comms := make([]*NCCLComm, len(hs))
	for i, h := range hs {
		comms[i] = &NCCLComm{lib: l, h: h, rank: i, world: len(hs)}
	}
	return comms, nil
}

func (c *NCCLComm) Rank() int      { return c.rank }
func (c *NCCLComm) WorldSize() int { return c.world }

// Destroy frees the communicator after its pending work is done.
func (c *NCCLComm) Destroy() error { return c.release("ncclCommDestroy", c.lib.commDestroy) }

// Abort frees the communicator at once, cancelling its pending collectives
// (use it when a peer rank failed, so this rank does not wait forever).
func (c *NCCLComm) Abort() error { return c.release("ncclCommAbort", c.lib.commAbort) }

func (c *NCCLComm) release(name string, fn func(uintptr) NCCLResult) error {
	if c.h == 0 {
		return nil
	}
	h := c.h
	c.h = 0
	return c.lib.check(name, fn(h))
}

func (c *NCCLComm) handle() (uintptr, error) {
	if c.h == 0 {
		return 0, ErrNoNCCLComm
	}
	return c.h, nil
}

// reduceArgs is the handle and NCCL reduction of a reducing collective.
func (c *NCCLComm) reduceArgs(op Op) (h uintptr, o int32, err error) {
	if h, err = c.handle(); err != nil {
		return 0, 0, err
	}
	o, err = ncclRedOp(op)
	return h, o, err
}

// AllReduce reduces count elements of send over ranks into recv (which may
// be send), enqueued on stream.
func (c *NCCLComm) AllReduce(send, recv uintptr, count int, dt NCCLDataType, op Op, stream uintptr) error {
	h, o, err := c.reduceArgs(op)
	if err != nil {
		return err
	}
	return c.lib.check("ncclAllReduce", c.lib.allReduce(send, recv, uintptr(count), dt, o, h, stream))
}

// ReduceScatter reduces world*recvCount elements of send over ranks and
// writes block Rank() into recv (recvCount elements).
func (c *NCCLComm) ReduceScatter(send, recv uintptr, recvCount int, dt NCCLDataType, op Op, stream uintptr) error {
	h, o, err := c.reduceArgs(op)
	if err != nil {
		return err
	}
	return c.lib.check("ncclReduceScatter", c.lib.reduceScatter(send, recv, uintptr(recvCount), dt, o, h, stream))
}

// AllGather writes rank r's sendCount elements into block r of recv.
func (c *NCCLComm) AllGather(send, recv uintptr, sendCount int, dt NCCLDataType, stream uintptr) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	return c.lib.check("ncclAllGather", c.lib.allGather(send, recv, uintptr(sendCount), dt, h, stream))
}

// Broadcast copies root's send into recv on every rank.
func (c *NCCLComm) Broadcast(send, recv uintptr, count int, dt NCCLDataType, root int, stream uintptr) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	return c.lib.check("ncclBroadcast", c.lib.broadcast(send, recv, uintptr(count), dt, int32(root), h, stream))
}

// UniqueIDFromBytes converts the bytes ShareBytes returned back into a UniqueID.
func UniqueIDFromBytes(b []byte) (UniqueID, error) {
	var id UniqueID
	if len(b) != len(id) {
		return id, fmt.Errorf("nccl: unique id has %d bytes, want %d", len(b), len(id))
	}
	copy(id[:], b)
	return id, nil
}

// CommOfWorld joins the NCCL communicator of a world of processes
// (launch_from_torch): rank 0 makes the unique id, the world's store hands
// it to every process (ProcComm.ShareBytes), and each calls CommInitRank.
// The calling thread must have the context of this process's GPU
// (LOCAL_RANK) current.
func (l *NCCL) CommOfWorld(pc *ProcComm) (*NCCLComm, error) {
	var mine []byte
	if pc.Rank() == 0 {
		id, err := l.GetUniqueID()
		if err != nil {
			return nil, err
		}
		mine = id[:]
	}
	b, err := pc.ShareBytes(mine)
	if err != nil {
		return nil, err
	}
	id, err := UniqueIDFromBytes(b)
	if err != nil {
		return nil, err
	}
	return l.CommInitRank(pc.WorldSize(), id, pc.Rank())
}
