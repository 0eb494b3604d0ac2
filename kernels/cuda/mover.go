package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"resnetlab/kernels"
)

// The asynchronous mover (kernels.AsyncMover). Copies between device
// tensors and host memory run on a second non-blocking stream, the copy
// stream, so they overlap the kernels of the compute stream:
//
//   - Every copy first waits for an event recorded on the compute stream
//     when it is issued: a fresh destination's zero fill, and the last
//     kernel reading a download's source, come before it.
//   - Host data goes through pinned staging buffers (cuMemAllocHost), so
//     the DMA is truly asynchronous; the Go slice is copied (on several cores) into the
//     staging at issue (uploads) or out of it on completion (downloads).
//     Host memory from AllocPinned (pinned.go) is used directly instead.
//   - Half-precision tensors are converted on the device by the convert
//     kernel, on the copy stream, through a fixed fp32 bounce buffer
//     (bounceElems floats, outside the allocator's accounting), so the host
//     never converts element by element and no device temporary is needed.
//   - Each move records an event on the copy stream when it ends: Await
//     makes the compute stream wait for it, Finish and Done query it.
//     The copy stream completes moves in issue order, so finished moves
//     are reaped from the front of the in-flight list.
//
// A Backend without any move never creates the copy stream.

const bounceElems = 1 << 20 // 4 MiB of fp32

var _ kernels.AsyncMover = (*Backend)(nil)

// copier is the copy stream and the resources its moves use.
type copier struct {
	stream    uintptr
	computeEv uintptr // compute-stream mark the copy stream waits on
	bounce    uintptr // fp32 device buffer for conversions
	events    []uintptr
	pinned    map[int64][]unsafe.Pointer // idle staging buffers by size class
	regions   map[uintptr]*pinRegion     // pinned buffers handed out (pinned.go), by address
	held      int64                      // bytes of pinned memory allocated (staging and AllocPinned)
	inflight  []*move                    // issue order
}

// move is one copy on the copy stream.
type move struct {
	b     *Backend
	ev    uintptr
	stage unsafe.Pointer // pinned staging; nil when the host side is pinned itself
	class int64
	n     int
	dst   []float32  // a download's destination, filled from stage on completion
	reg   *pinRegion // the pinned host side of a direct move
	done  bool
}

// Done reports without blocking whether the copy has completed (and
// completes a download into its destination when it has).
func (m *move) Done() bool {
	if m.done {
		return true
	}
	defer m.b.bind()()
	return m.b.cp.poll(m)
}

// poll queries m's event; a finished move is completed.
func (c *copier) poll(m *move) bool {
	r, err := queryEvent(m.ev)
	if err != nil {
		panic(err)
	}
	if r {
		c.complete(m)
	}
	return r
}

// queryEvent reports whether ev has completed. It runs at every Gemini
// hook for each offload in flight, so "not ready" costs one driver call.
func queryEvent(ev uintptr) (bool, error) {
	r, _, _ := purego.SyscallN(drv.cuEventQuery, ev)
	switch r {
	case 0:
		return true, nil
	case errNotReady:
		return false, nil
	}
	return false, &Error{Call: "cuEventQuery", Code: int(r), Name: errorName(r)}
}

// complete hands a finished move's data to its destination and recycles
// its staging buffer and event.
func (c *copier) complete(m *move) {
	if m.done {
		return
	}
	if m.reg != nil {
		c.release(m.reg)
	} else {
		if m.dst != nil {
			parallelCopy(m.dst, unsafe.Slice((*float32)(m.stage), m.n))
		}
		c.pinned[m.class] = append(c.pinned[m.class], m.stage)
	}
	c.events = append(c.events, m.ev)
	m.stage, m.ev, m.dst, m.reg, m.done = nil, 0, nil, nil, true
}

// reap completes the finished moves at the front of the in-flight list.
func (c *copier) reap() {
	i := 0
	for ; i < len(c.inflight); i++ {
		m := c.inflight[i]
		if !m.done && !c.poll(m) {
			break
		}
	}
	c.inflight = append(c.inflight[:0], c.inflight[i:]...)
}

// copier returns the copier, creating it on first use.
func (b *Backend) copier() *copier {
	if b.cp == nil {
		c := &copier{pinned: map[int64][]unsafe.Pointer{}, regions: map[uintptr]*pinRegion{}}
		must("cuStreamCreate(copy)", drv.cuStreamCreate, uintptr(unsafe.Pointer(&c.stream)), streamNonBlocking)
		b.cp = c
		must("cuEventCreate", drv.cuEventCreate, uintptr(unsafe.Pointer(&c.computeEv)), eventDisableTiming)
		must("cuMemAlloc_v2(bounce)", drv.cuMemAlloc, uintptr(unsafe.Pointer(&c.bounce)), 4*bounceElems)
	}
	return b.cp
}

// copies returns the copier after reaping and ordering the copy stream
// after the compute work issued so far.
func (b *Backend) copies() *copier {
	c := b.copier()
	c.reap()
	must("cuEventRecord(compute)", drv.cuEventRecord, c.computeEv, b.stream)
	must("cuStreamWaitEvent(copy)", drv.cuStreamWaitEvent, c.stream, c.computeEv, 0)
	return c
}

// staging returns a pinned buffer of at least n floats.
func (c *copier) staging(n int) (unsafe.Pointer, int64) {
	class := sizeClass(4 * int64(n))
	if l := c.pinned[class]; len(l) > 0 {
		p := l[len(l)-1]
		c.pinned[class] = l[:len(l)-1]
		return p, class
	}
	var p unsafe.Pointer
	must(fmt.Sprintf("cuMemAllocHost_v2(%d bytes of staging)", class), drv.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(class))
	c.held += class
	return p, class
}

// parallelCopy copies src into dst (equal lengths) on several cores when
// it is large: one core's memcpy bandwidth, not the PCIe link, bounds a
// chunk's trip through the pinned staging otherwise.
func parallelCopy(dst, src []float32) {
	const part = 1 << 18 // floats per goroutine, at least
	k := min(runtime.GOMAXPROCS(0), 8, len(src)/part)
	if k <= 1 {
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	for i := range k {
		lo, hi := i*len(src)/k, (i+1)*len(src)/k
		wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
	}
	wg.Wait()
}

// finish records the end of a move issued on the copy stream.
func (c *copier) finish(b *Backend, h hostSide, n int, dst []float32) *move {
	m := &move{b: b, stage: h.stage, class: h.class, n: n, reg: h.reg}
	if h.reg == nil {
		m.dst = dst
	} else {
		h.reg.busy++
	}
	if k := len(c.events); k > 0 {
		m.ev, c.events = c.events[k-1], c.events[:k-1]
	} else {
		must("cuEventCreate", drv.cuEventCreate, uintptr(unsafe.Pointer(&m.ev)), eventDisableTiming)
	}
	must("cuEventRecord(copy)", drv.cuEventRecord, m.ev, c.stream)
	c.inflight = append(c.inflight, m)
	return m
}

// checkMove checks an asynchronous move of n values to or from t.
func (b *Backend) checkMove(op string, t *kernels.Tensor, n int) {
	b.owns(op, t)
	b.noCapture(op)
	if n != t.Len() {
		panic(fmt.Sprintf("cuda: %s: %d values for %v", op, n, t))
	}
}

// hostSide is the host end of one move: a pinned buffer of the caller's
// (reg, used directly) or a staging buffer (stage, class).
type hostSide struct {
	ptr   uintptr
	stage unsafe.Pointer
	class int64
	reg   *pinRegion
}

// hostEnd returns the host end for s: s itself when it is pinned memory,
// else a staging buffer.
func (c *copier) hostEnd(s []float32) hostSide {
	if r := c.pinnedOf(s); r != nil {
		return hostSide{ptr: uintptr(unsafe.Pointer(&s[0])), reg: r}
	}
	stage, class := c.staging(len(s))
	return hostSide{ptr: uintptr(stage), stage: stage, class: class}
}

// UploadAsync starts copying src into dst (rounded to dst's dtype) on the
// copy stream. Ordinary memory may be reused on return (it was copied into
// staging); pinned memory (AllocPinned) is read by the DMA itself and must
// not change until the move is done.
func (b *Backend) UploadAsync(dst *kernels.Tensor, src []float32) kernels.Move {
	defer b.bind()()
	n := len(src)
	b.checkMove("UploadAsync", dst, n)
	if n == 0 {
		return kernels.Completed
	}
	c := b.copies()
	h := c.hostEnd(src)
	if h.reg == nil {
		parallelCopy(unsafe.Slice((*float32)(h.stage), n), src)
	}
	if dst.DType == kernels.F32 {
		must("cuMemcpyHtoDAsync_v2(copy)", drv.cuMemcpyHtoDAsync, dst.Dev, h.ptr, uintptr(4*n), c.stream)
		return c.finish(b, h, n, nil)
	}
	es := uintptr(dst.DType.Size())
	for off := 0; off < n; off += bounceElems {
		k := min(bounceElems, n-off)
		must("cuMemcpyHtoDAsync_v2(bounce)", drv.cuMemcpyHtoDAsync, c.bounce, h.ptr+uintptr(4*off), uintptr(4*k), c.stream)
		b.args.reset().ptr(dst.Dev + uintptr(off)*es).i32(int(dst.DType)).ptr(c.bounce).i32(int(kernels.F32)).i64(k)
		b.launchOn(c.stream, "convert", b.gridFor(k), 1, 1, 256)
	}
	return c.finish(b, h, n, nil)
}

// DownloadAsync starts copying src into dst as float32 once the compute
// work issued so far is done; dst is filled when the move completes
// (directly by the DMA when dst is pinned memory).
func (b *Backend) DownloadAsync(src *kernels.Tensor, dst []float32) kernels.Move {
	defer b.bind()()
	n := len(dst)
	b.checkMove("DownloadAsync", src, n)
	if n == 0 {
		return kernels.Completed
	}
	c := b.copies()
	h := c.hostEnd(dst)
	if src.DType == kernels.F32 {
		must("cuMemcpyDtoHAsync_v2(copy)", drv.cuMemcpyDtoHAsync, h.ptr, src.Dev, uintptr(4*n), c.stream)
		return c.finish(b, h, n, dst)
	}
	es := uintptr(src.DType.Size())
	for off := 0; off < n; off += bounceElems {
		k := min(bounceElems, n-off)
		b.args.reset().ptr(c.bounce).i32(int(kernels.F32)).ptr(src.Dev + uintptr(off)*es).i32(int(src.DType)).i64(k)
		b.launchOn(c.stream, "convert", b.gridFor(k), 1, 1, 256)
		must("cuMemcpyDtoHAsync_v2(bounce)", drv.cuMemcpyDtoHAsync, h.ptr+uintptr(4*off), c.bounce, uintptr(4*k), c.stream)
	}
	return c.finish(b, h, n, dst)
}

// Await makes the compute ops issued from now on wait for m.
func (b *Backend) Await(m kernels.Move) {
	mm, ok := m.(*move)
	if !ok || mm.done {
		return
	}
	defer b.bind()()
	b.noCapture("Await")
	must("cuStreamWaitEvent(compute)", drv.cuStreamWaitEvent, b.stream, mm.ev, 0)
}

// Finish blocks until m has completed.
func (b *Backend) Finish(m kernels.Move) {
	mm, ok := m.(*move)
	if !ok || mm.done {
		return
	}
	defer b.bind()()
	must("cuEventSynchronize(copy)", drv.cuEventSynchronize, mm.ev)
	b.cp.complete(mm)
}

// closeCopier waits for the copy stream and frees its resources (Close).
func (b *Backend) closeCopier() {
	c := b.cp
	if c == nil {
		return
	}
	_ = call("cuStreamSynchronize(copy)", drv.cuStreamSynchronize, c.stream)
	for _, m := range c.inflight {
		c.complete(m)
	}
	for _, l := range c.pinned {
		for _, p := range l {
			_ = call("cuMemFreeHost(staging)", drv.cuMemFreeHost, uintptr(p))
		}
	}
	for _, r := range c.regions { // pinned buffers never given back
		_ = call("cuMemFreeHost(pinned)", drv.cuMemFreeHost, uintptr(r.base))
	}
	for _, ev := range append(c.events, c.computeEv) {
		_ = call("cuEventDestroy_v2", drv.cuEventDestroy, ev)
	}
	_ = call("cuMemFree_v2(bounce)", drv.cuMemFree, c.bounce)
	_ = call("cuStreamDestroy_v2(copy)", drv.cuStreamDestroy, c.stream)
	b.cp = nil
}
