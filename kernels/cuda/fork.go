package cuda

import (
	"unsafe"

	"resnetlab/kernels"
)

// The side stream: a second compute stream, so that Conv2dBackward (and
// LinearBackward) run the weight gradient's GEMM concurrently with the data
// gradient's. The two only read common inputs (dy) and write different
// outputs, and on small maps (ResNet's layer3 and layer4) neither fills
// the GPU alone.
//
// An op forks and joins within itself, so no other op ever sees the side
// stream busy: fork records an event on the main stream and makes the side
// stream wait for it (the side work comes after everything issued before);
// join records an event on the side stream and makes the main stream wait
// for it (everything issued afterwards comes after the side work). Inside
// a graph capture the same event wait joins the side stream into the
// capture (the capture is relaxed), and the join before EndCapture brings
// it back, so the graph gets the two branches as parallel nodes.
//
// The allocator reuses a freed block at once, which is safe only in the
// order of one stream. Between fork and join the two streams' work is
// unordered, so every workspace block freed there (split-K partial sums,
// tap scratch) is held back and returned at the join: a block is never
// handed to one stream while the other may still use it, and the two
// GEMMs in flight always have distinct workspaces.
type sideStream struct {
	stream uintptr
	forkEv uintptr // recorded on the main stream, waited on by the side stream
	joinEv uintptr // recorded on the side stream, waited on by the main stream
	forked bool
	held   []heldBlock // workspace released between fork and join
	forks  int         // forks so far (tests check the side stream is used)
}

type heldBlock struct {
	p uintptr
	n int64
}

// openSide creates the side stream and its two events (New).
func (b *Backend) openSide() error {
	s := &sideStream{}
	if err := call("cuStreamCreate(side)", drv.cuStreamCreate, uintptr(unsafe.Pointer(&s.stream)), streamNonBlocking); err != nil {
		return err
	}
	b.side = s
	if err := call("cuEventCreate(fork)", drv.cuEventCreate, uintptr(unsafe.Pointer(&s.forkEv)), eventDisableTiming); err != nil {
		return err
	}
	return call("cuEventCreate(join)", drv.cuEventCreate, uintptr(unsafe.Pointer(&s.joinEv)), eventDisableTiming)
}

// closeSide waits for the side stream and destroys it (Close).
func (b *Backend) closeSide() {
	s := b.side
	if s == nil {
		return
	}
	if s.stream != 0 {
		_ = call("cuStreamSynchronize(side)", drv.cuStreamSynchronize, s.stream)
	}
	for _, ev := range []uintptr{s.forkEv, s.joinEv} {
		if ev != 0 {
			_ = call("cuEventDestroy_v2(side)", drv.cuEventDestroy, ev)
		}
	}
	if s.stream != 0 {
		_ = call("cuStreamDestroy_v2(side)", drv.cuStreamDestroy, s.stream)
	}
	b.side = nil
}

// concurrent reports whether an op may fork the side stream.
func (b *Backend) concurrent() bool { return !b.oneStream && b.side != nil && b.side.stream != 0 }

// fork orders the side stream after the work issued so far on the main
// stream and returns it; workspace freed until join is held back.
func (b *Backend) fork() uintptr {
	s := b.side
	must("cuEventRecord(fork)", drv.cuEventRecord, s.forkEv, b.stream)
	must("cuStreamWaitEvent(fork)", drv.cuStreamWaitEvent, s.stream, s.forkEv, 0)
	s.forked = true
	s.forks++
	return s.stream
}

// join orders the main stream after the work issued on the side stream
// and returns the workspace held back since fork to the allocator: from
// here on every use of those blocks is queued behind both streams' work.
func (b *Backend) join() {
	s := b.side
	must("cuEventRecord(join)", drv.cuEventRecord, s.joinEv, s.stream)
	must("cuStreamWaitEvent(join)", drv.cuStreamWaitEvent, b.stream, s.joinEv, 0)
	s.forked = false
	for _, h := range s.held {
		b.alloc.put(h.p, h.n, kernels.CatWorkspace)
	}
	clear(s.held)
	s.held = s.held[:0]
}

// holding reports whether workspace frees are being held back (between a
// fork and its join).
func (b *Backend) holding() bool { return b.side != nil && b.side.forked }

// syncSide waits for the side stream when it may be busy (between a fork
// and its join; otherwise the main stream's join covers it).
func (b *Backend) syncSide() {
	if b.holding() {
		must("cuStreamSynchronize(side)", drv.cuStreamSynchronize, b.side.stream)
	}
}
