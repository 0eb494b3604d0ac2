package comm

import (
	"errors"
	"fmt"

	"resnetlab/kernels"
)

// Group is a set of in-process ranks (goroutines) sharing host memory. Each
// rank uses its own Communicator from Comm; the collectives synchronise on
// one abortable barrier.
type Group struct {
	world int
	bar   *barrier
	calls []call // calls[r] is rank r's current collective, read by peers
}

// NewGroup makes a group of world ranks. It panics if world < 1.
func NewGroup(world int) *Group {
	if world < 1 {
		panic(fmt.Sprintf("comm.NewGroup: world size %d, want >= 1", world))
	}
	return &Group{world: world, bar: newBarrier(world), calls: make([]call, world)}
}

// WorldSize is the number of ranks.
func (g *Group) WorldSize() int { return g.world }

// Comm is rank's communicator; use it from that rank's goroutine only.
func (g *Group) Comm(rank int) Communicator {
	if rank < 0 || rank >= g.world {
		panic(fmt.Sprintf("comm.Group.Comm: rank %d outside [0,%d)", rank, g.world))
	}
	return &hostComm{g: g, rank: rank}
}

// Abort makes every pending and future collective of the group fail with an
// error wrapping ErrAborted and cause.
func (g *Group) Abort(cause error) { g.bar.abort(cause) }

type kind uint8

const (
	kAllReduce kind = iota + 1
	kReduceScatter
	kAllGather
	kBroadcast
	kBarrier
	kFree // DeviceComm.Free
)

var kindNames = [...]string{"", "AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Barrier", "Free"}

func (k kind) String() string {
	if k == kAbort {
		return "Abort"
	}
	if int(k) >= len(kindNames) || k == 0 {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return kindNames[k]
}

// call is one rank's part of a collective. Its owner writes it before the
// collective's first barrier; peers read it until the last barrier.
type call struct {
	kind     kind
	op       Op
	root     int
	n        int // per-rank length that must agree on all ranks
	dst, src []float32
	bad      string // this rank's argument error, reported on every rank

	// A DeviceComm's call (devcomm.go): its tensors and the comm itself,
	// whose fences peers wait on.
	dev  bool
	dt   kernels.DType
	tdst *kernels.Tensor
	tsrc *kernels.Tensor
	dc   *DeviceComm
}

// check returns the same error on every rank, since every rank sees the
// same calls.
func check(calls []call) error {
	c0 := calls[0]
	for r, c := range calls {
		switch {
		case c.bad != "":
			return fmt.Errorf("rank %d: %s", r, c.bad)
		case c.kind != c0.kind || c.dev != c0.dev:
			return fmt.Errorf("rank %d called %s while rank 0 called %s", r, c.name(), c0.name())
		case c.dt != c0.dt:
			return fmt.Errorf("rank %d passed %s tensors, rank 0 passed %s", r, c.dt, c0.dt)
		}
		if msg := mismatch(r, c.frame(), c0.frame()); msg != "" {
			return errors.New(msg)
		}
	}
	return nil
}

// frame is the part of the call that every rank must agree on, as it
// travels between processes (proccoll.go).
func (c call) frame() frame {
	return frame{kind: c.kind, op: c.op, root: uint32(c.root), n: uint64(c.n)}
}

func (c call) name() string {
	if c.dev {
		return "device " + c.kind.String()
	}
	return c.kind.String()
}

type hostComm struct {
	g    *Group
	rank int
}

func (c *hostComm) Rank() int      { return c.rank }
func (c *hostComm) WorldSize() int { return c.g.world }

// run publishes this rank's call, checks that all ranks agree, then runs the
// phases with a barrier after each: no rank reads a peer's buffer before
// the peer published it, and no rank returns (and reuses its buffers)
// before every peer is done reading them.
func (c *hostComm) run(cl call, phases ...func(calls []call)) error {
	g := c.g
	g.calls[c.rank] = cl
	if err := g.bar.wait(); err != nil {
		return fmt.Errorf("parallel: %s on rank %d: %w", cl.kind, c.rank, err)
	}
	bad := check(g.calls)
	if bad != nil {
		phases = nil
	}
	for _, p := range phases {
		p(g.calls)
		if err := g.bar.wait(); err != nil {
			return fmt.Errorf("parallel: %s on rank %d: %w", cl.kind, c.rank, err)
		}
	}
	if bad != nil || len(phases) == 0 {
		if err := g.bar.wait(); err != nil {
			return fmt.Errorf("parallel: %s on rank %d: %w", cl.kind, c.rank, errors.Join(bad, err))
		}
	}
	if bad != nil {
		return fmt.Errorf("parallel: %s: %w", cl.kind, bad)
	}
	return nil
}

// block is the [lo,hi) range of block r when n elements are split over w
// ranks as evenly as possible (the first n%w blocks get one more).
func block(n, w, r int) (lo, hi int) {
	base, rem := n/w, n%w
	lo = r*base + min(r, rem)
	hi = lo + base
	if r < rem {
		hi++
	}
	return lo, hi
}

func opCheck(op Op) string {
	if !op.valid() {
		return fmt.Sprintf("unknown reduction op %d (want Sum or Avg)", uint8(op))
	}
	return ""
}

func (c *hostComm) AllReduce(buf []float32, op Op) error {
	w := c.g.world
	lo, hi := block(len(buf), w, c.rank)
	srcs := make([][]float32, w)
	reduce := func(calls []call) {
		for k := range calls {
			srcs[k] = calls[k].dst[lo:hi]
		}
		reduceInto(buf[lo:hi], srcs, op)
	}
	gather := func(calls []call) {
		for k := range calls {
			if k != c.rank {
				klo, khi := block(len(buf), w, k)
				copy(buf[klo:khi], calls[k].dst[klo:khi])
			}
		}
	}
	return c.run(call{kind: kAllReduce, op: op, n: len(buf), dst: buf, bad: opCheck(op)}, reduce, gather)
}

func (c *hostComm) ReduceScatter(dst, src []float32, op Op) error {
	w, n := c.g.world, len(dst)
	cl := call{kind: kReduceScatter, op: op, n: n, dst: dst, src: src, bad: opCheck(op)}
	if len(src) != w*n {
		cl.bad = fmt.Sprintf("ReduceScatter src has %d elements, want world size %d x len(dst) %d = %d", len(src), w, n, w*n)
	}
	lo := c.rank * n
	srcs := make([][]float32, w)
	return c.run(cl, func(calls []call) {
		for k := range calls {
			srcs[k] = calls[k].src[lo : lo+n]
		}
		reduceInto(dst, srcs, op)
	})
}

func (c *hostComm) AllGather(dst, src []float32) error {
	w, n := c.g.world, len(src)
	cl := call{kind: kAllGather, n: n, dst: dst, src: src}
	if len(dst) != w*n {
		cl.bad = fmt.Sprintf("AllGather dst has %d elements, want world size %d x len(src) %d = %d", len(dst), w, n, w*n)
	}
	return c.run(cl, func(calls []call) {
		for k := range calls {
			out := dst[k*n : k*n+n]
			if n > 0 && &out[0] == &calls[k].src[0] {
				continue // in place: src is already block k of dst
			}
			copy(out, calls[k].src)
		}
	})
}

func (c *hostComm) Broadcast(buf []float32, root int) error {
	cl := call{kind: kBroadcast, root: root, n: len(buf), dst: buf}
	if root < 0 || root >= c.g.world {
		cl.bad = fmt.Sprintf("Broadcast root %d outside [0,%d)", root, c.g.world)
	}
	return c.run(cl, func(calls []call) {
		if c.rank != root {
			copy(buf, calls[root].dst)
		}
	})
}

func (c *hostComm) Barrier() error { return c.run(call{kind: kBarrier}) }
