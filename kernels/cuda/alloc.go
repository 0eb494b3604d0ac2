package cuda

import (
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"resnetlab/kernels"
)

// allocator is a caching device allocator. Blocks come in size classes (a
// quarter of a power of two apart, at least 512 bytes); a freed block goes on
// its class's free list and is handed out again without cuMemFree, so a
// training step allocates nothing from the driver once warm. All work runs
// on the backend's one stream, so a block freed after queued kernels that
// use it can be reused by later kernels at once (stream order). The side
// stream (fork.go) keeps that true: workspace freed while it runs beside
// the main stream is held back until it is joined back into it.
//
// Bytes are accounted per kernels.Category at the tensors' own sizes; the
// cache's footprint is Reserved.
type allocator struct {
	b        *Backend
	free     map[int64][]uintptr
	live     map[uintptr]int64 // block -> class size
	reserved int64

	inUse, peak      [kernels.NumCategories]int64
	total, totalPeak int64

	// capFreed holds the blocks freed while a graph is being captured: the
	// graph keeps using them, so EndCapture takes them out of circulation.
	capFreed map[uintptr]bool
}

func (a *allocator) init(b *Backend) {
	a.b = b
	a.free = map[int64][]uintptr{}
	a.live = map[uintptr]int64{}
}

// sizeClass rounds n up to its class.
func sizeClass(n int64) int64 {
	if n <= 512 {
		return 512
	}
	step := int64(1) << (bits.Len64(uint64(n-1)) - 3)
	return (n + step - 1) / step * step
}

// get returns a block of at least n bytes and accounts n bytes to cat.
func (a *allocator) get(n int64, cat kernels.Category) uintptr {
	c := sizeClass(n)
	var p uintptr
	if l := a.free[c]; len(l) > 0 {
		p = l[len(l)-1]
		a.free[c] = l[:len(l)-1]
	} else {
		p = a.fresh(c)
	}
	a.live[p] = c
	a.account(cat, n)
	return p
}

// fresh allocates from the driver; when the device is full it returns the
// cache to the driver and tries once more.
func (a *allocator) fresh(c int64) uintptr {
	var p uintptr
	err := call("cuMemAlloc_v2", drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(c))
	var e *Error
	if errors.As(err, &e) && e.Code == errOutOfMemory && !a.b.capturing && a.cached() > 0 {
		a.b.syncStream()
		a.b.syncSide()
		a.emptyCache()
		err = call("cuMemAlloc_v2", drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(c))
	}
	if err != nil {
		err.(*Error).Call = fmt.Sprintf("cuMemAlloc_v2(%d bytes; %d in use, %d reserved, capacity %d)", c, a.total, a.reserved, a.b.capacity)
		panic(err)
	}
	a.reserved += c
	return p
}

// put returns block p, which held n bytes of cat, to its free list.
func (a *allocator) put(p uintptr, n int64, cat kernels.Category) {
	c, ok := a.live[p]
	if !ok {
		panic(fmt.Sprintf("cuda: free of device pointer %#x that this backend did not allocate (or freed twice)", p))
	}
	delete(a.live, p)
	a.free[c] = append(a.free[c], p)
	a.account(cat, -n)
	if a.capFreed != nil {
		a.capFreed[p] = true
	}
}

func (a *allocator) account(cat kernels.Category, n int64) {
	a.inUse[cat] += n
	a.total += n
	if a.inUse[cat] > a.peak[cat] {
		a.peak[cat] = a.inUse[cat]
	}
	if a.total > a.totalPeak {
		a.totalPeak = a.total
	}
}

func (a *allocator) cached() int64 {
	var s int64
	for c, l := range a.free {
		s += c * int64(len(l))
	}
	return s
}

// emptyCache frees every cached block; the caller has synchronised.
func (a *allocator) emptyCache() {
	for c, l := range a.free {
		for _, p := range l {
			_ = call("cuMemFree_v2", drv.cuMemFree, p)
			a.reserved -= c
		}
	}
	a.free = map[int64][]uintptr{}
}

// releaseAll frees every block, live or cached (Close).
func (a *allocator) releaseAll() {
	if a.free == nil {
		return
	}
	a.emptyCache()
	for p, c := range a.live {
		_ = call("cuMemFree_v2", drv.cuMemFree, p)
		a.reserved -= c
	}
	a.live = map[uintptr]int64{}
}

// beginCapture starts recording frees; endCapture withdraws the freed
// blocks that are still cached and hands them to the graph.
func (a *allocator) beginCapture() { a.capFreed = map[uintptr]bool{} }

func (a *allocator) endCapture() map[int64][]uintptr {
	kept := map[int64][]uintptr{}
	for c, l := range a.free {
		rest := l[:0]
		for _, p := range l {
			if a.capFreed[p] {
				kept[c] = append(kept[c], p)
			} else {
				rest = append(rest, p)
			}
		}
		a.free[c] = rest
	}
	a.capFreed = nil
	return kept
}

// giveBack returns a destroyed graph's blocks to the free lists.
func (a *allocator) giveBack(blocks map[int64][]uintptr) {
	for c, l := range blocks {
		a.free[c] = append(a.free[c], l...)
	}
}

// New returns a zero-filled tensor.
func (b *Backend) New(cat kernels.Category, dt kernels.DType, shape ...int) *kernels.Tensor {
	defer b.bind()()
	t := &kernels.Tensor{Shape: append([]int(nil), shape...), DType: dt, Cat: cat, Owner: b}
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("cuda: New: negative dimension in shape %v", shape))
		}
	}
	if n := t.Bytes(); n > 0 {
		t.Dev = b.alloc.get(n, cat)
		b.memsetAsync(t.Dev, int(n))
	}
	return t
}

// Free returns t's memory to the cache; t must not be used afterwards.
// Freeing a tensor twice is a no-op (its Dev is cleared).
func (b *Backend) Free(t *kernels.Tensor) {
	if t == nil || t.Dev == 0 {
		return
	}
	b.owns("Free", t)
	b.alloc.put(t.Dev, t.Bytes(), t.Cat)
	t.Dev = 0
}

// MemStats reports bytes in use and peaks per category.
func (b *Backend) MemStats() kernels.MemStats {
	a := &b.alloc
	return kernels.MemStats{InUse: a.inUse, Peak: a.peak, TotalPeak: a.totalPeak, Capacity: b.capacity}
}

// ResetPeak starts a new peak window at the current usage.
func (b *Backend) ResetPeak() {
	a := &b.alloc
	a.peak = a.inUse
	a.totalPeak = a.total
}

// Reserved is the device memory the allocator holds (live plus cached).
func (b *Backend) Reserved() int64 { return b.alloc.reserved }

// workspace allocates n bytes of scratch, accounted as CatWorkspace.
func (b *Backend) workspace(n int64) uintptr { return b.alloc.get(n, kernels.CatWorkspace) }

// release frees workspace; between a fork and its join (fork.go) the block
// is held back until the join, when both streams' work is ordered before
// any later use.
func (b *Backend) release(p uintptr, n int64) {
	if b.holding() {
		b.side.held = append(b.side.held, heldBlock{p, n})
		return
	}
	b.alloc.put(p, n, kernels.CatWorkspace)
}
