package cuda

import (
	"fmt"
	"unsafe"

	"resnetlab/kernels"
)

// Pinned host memory (kernels.PinnedHost): buffers from cuMemAllocHost
// that the copy stream reads and writes by DMA directly, so a move from or
// into one skips the staging copy on the host (the largest cost of a
// budgeted Gemini step when its host tensors are ordinary Go memory).
// Buffers come from the copy stream's staging pool, by size class, and go
// back to it; a buffer freed while a move still uses it is recycled when
// that move completes.

var _ kernels.PinnedHost = (*Backend)(nil)

// pinRegion is one pinned buffer handed out by AllocPinned.
type pinRegion struct {
	base  unsafe.Pointer
	class int64 // bytes, the staging pool's size class
	busy  int   // moves in flight that read or write it
	freed bool  // FreePinned was called while busy
}

// AllocPinned returns n floats of pinned host memory; the contents are
// undefined.
func (b *Backend) AllocPinned(n int) []float32 {
	if n <= 0 {
		return nil
	}
	defer b.bind()()
	c := b.copier()
	p, class := c.staging(n)
	c.regions[uintptr(p)] = &pinRegion{base: p, class: class}
	return unsafe.Slice((*float32)(p), n)
}

// FreePinned gives back a buffer from AllocPinned.
func (b *Backend) FreePinned(buf []float32) {
	if len(buf) == 0 {
		return
	}
	c := b.cp
	p := uintptr(unsafe.Pointer(&buf[0]))
	r := c.regions[p]
	if r == nil {
		panic(fmt.Sprintf("cuda: FreePinned: %#x is not pinned memory of this backend", p))
	}
	delete(c.regions, p)
	r.freed = true
	if r.busy == 0 {
		c.pinned[r.class] = append(c.pinned[r.class], r.base)
	}
}

// pinnedOf returns the pinned buffer that s starts, or nil when s is
// ordinary memory (then a move goes through staging).
func (c *copier) pinnedOf(s []float32) *pinRegion {
	if len(s) == 0 || len(c.regions) == 0 {
		return nil
	}
	r := c.regions[uintptr(unsafe.Pointer(&s[0]))]
	if r == nil || int64(4*len(s)) > r.class {
		return nil
	}
	return r
}

// release ends a move's use of its pinned buffer.
func (c *copier) release(r *pinRegion) {
	r.busy--
	if r.freed && r.busy == 0 {
		c.pinned[r.class] = append(c.pinned[r.class], r.base)
	}
}

// PinnedBytes is the page-locked host memory the backend holds: the
// staging pool and the buffers handed out by AllocPinned.
func (b *Backend) PinnedBytes() int64 {
	if b.cp == nil {
		return 0
	}
	return b.cp.held
}
