package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"resnetlab/kernels"
)

var _ kernels.Profiler = (*Backend)(nil)

// profiler brackets every public op with two CUDA events while on. Eager
// ops are timed from when the stream reaches the op's first event to when
// it passes the second, so an op whose launches the host issues slower
// than the device runs them is charged that waiting too (the table's total
// against the step's wall time shows how much). Under a graph capture the
// events become event-record nodes of the graph (CU_EVENT_RECORD_EXTERNAL):
// after a replay the records hold that replay's pure device times.
type profiler struct {
	on      bool
	depth   int       // nesting of public ops; only the outermost is timed
	free    []uintptr // events ready for reuse
	all     []uintptr // every event made, destroyed by Close
	open    profRec   // the outermost op in progress
	recs    []profRec
	exitFns func()
}

type profRec struct {
	op, key    string
	start, end uintptr
	c0, c1     kernels.Counters
}

// enter starts public op name: it binds the context (see bind) and, while
// profiling, records the op's start event. The returned function ends it.
func (b *Backend) enter(op string, ts ...*kernels.Tensor) func() {
	runtime.LockOSThread()
	must("cuCtxSetCurrent", drv.cuCtxSetCurrent, b.ctx)
	p := &b.prof
	if !p.on {
		return runtime.UnlockOSThread
	}
	p.depth++
	if p.depth == 1 {
		p.open = profRec{op: op, key: kernels.ShapeKey(ts...), start: b.profEvent(), c0: b.cnt}
	}
	if p.exitFns == nil {
		p.exitFns = b.exit
	}
	return p.exitFns
}

// exit ends the op enter started.
func (b *Backend) exit() {
	defer runtime.UnlockOSThread()
	p := &b.prof
	p.depth--
	if p.depth > 0 || !p.on {
		return
	}
	r := p.open
	r.end = b.profEvent()
	r.c1 = b.cnt
	p.recs = append(p.recs, r)
}

// profEvent records a (reused) event on the stream.
func (b *Backend) profEvent() uintptr {
	p := &b.prof
	var e uintptr
	if n := len(p.free); n > 0 {
		e, p.free = p.free[n-1], p.free[:n-1]
	} else {
		must("cuEventCreate", drv.cuEventCreate, uintptr(unsafe.Pointer(&e)), eventDefault)
		p.all = append(p.all, e)
	}
	if b.capturing {
		must("cuEventRecordWithFlags(external)", drv.cuEventRecordWithFlags, e, b.stream, eventRecordExternal)
	} else {
		must("cuEventRecord", drv.cuEventRecord, e, b.stream)
	}
	return e
}

// StartProfile times every following op until StopProfile.
func (b *Backend) StartProfile() {
	b.prof.on = true
	b.prof.recs = b.prof.recs[:0]
}

// StopProfile waits for the device and returns one record per op since
// StartProfile, in issue order. For ops captured into a graph, call it
// after the graph's replay: the records then hold that replay's times.
func (b *Backend) StopProfile() ([]kernels.OpRecord, error) {
	defer b.bind()()
	p := &b.prof
	p.on = false
	if b.capturing {
		return nil, fmt.Errorf("cuda: StopProfile during a graph capture (end the capture and replay the graph first)")
	}
	b.cnt.Syncs++
	if err := call("cuStreamSynchronize", drv.cuStreamSynchronize, b.stream); err != nil {
		return nil, err
	}
	out := make([]kernels.OpRecord, 0, len(p.recs))
	var firstErr error
	for _, r := range p.recs {
		var ms float32
		if err := call("cuEventElapsedTime("+r.op+")", drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), r.start, r.end); err != nil && firstErr == nil {
			firstErr = err
		}
		out = append(out, kernels.OpRecord{Op: r.op, Key: r.key, MS: float64(ms), Counters: r.c1.Sub(r.c0)})
		p.free = append(p.free, r.start, r.end)
	}
	p.recs = p.recs[:0]
	return out, firstErr
}

// Counters are the launches, copies and host waits since New.
func (b *Backend) Counters() kernels.Counters { return b.cnt }

func (b *Backend) destroyProfEvents() {
	for _, e := range b.prof.all {
		_ = call("cuEventDestroy_v2", drv.cuEventDestroy, e)
	}
	b.prof.all, b.prof.free = nil, nil
}

// Counted driver calls: every stream operation and host wait goes through
// these, so Counters sees them all.

func (b *Backend) copyAsync(name string, fn, dst, src, n uintptr) {
	b.cnt.Copies++
	must(name, fn, dst, src, n, b.stream)
}

func (b *Backend) memsetAsync(p uintptr, n int) {
	b.cnt.Copies++
	must("cuMemsetD8Async", drv.cuMemsetD8Async, p, 0, uintptr(n), b.stream)
}

func (b *Backend) syncStream() {
	b.cnt.Syncs++
	must("cuStreamSynchronize", drv.cuStreamSynchronize, b.stream)
}

// enterList is enter for the multi-tensor ops: the key is the tensor count
// and their total elements.
func (b *Backend) enterList(op string, ts []*kernels.Tensor) func() {
	if !b.prof.on || b.prof.depth > 0 {
		return b.enter(op)
	}
	n := 0
	for _, t := range ts {
		if t != nil {
			n += t.Len()
		}
	}
	f := b.enter(op)
	b.prof.open.key = fmt.Sprintf("%d tensors, %d elements", len(ts), n)
	return f
}
