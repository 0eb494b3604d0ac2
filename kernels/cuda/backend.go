package cuda

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"resnetlab/kernels"
)

// Backend is one GPU with the device's primary context and a stream of its
// own (plus a side compute stream that ops fork and join within
// themselves, fork.go, and, once kernels.AsyncMover is used, a copy
// stream: mover.go).
// Like every kernels.Backend it is used by one goroutine at a time; ops
// are queued on the stream and Sync waits for them.
type Backend struct {
	// TF32 lets fp32 convolutions use TF32 tensor cores (10-bit mantissa
	// operands, fp32 accumulation), as cuDNN does under PyTorch's default
	// allow_tf32 for convolutions. Off gives exact fp32 FMA convolutions.
	// Linear layers always use exact fp32 (PyTorch's matmul default).
	// Default true unless RESNETLAB_TF32=0.
	TF32 bool

	ordinal  int
	dev      int32
	ctx      uintptr
	stream   uintptr
	name     string
	sms      int
	capacity int64

	mod      *modules
	args     argBuf
	host     unsafe.Pointer // pinned 4-byte landing for NonFinite's flag
	flag     uintptr        // device int flag
	alloc    allocator
	tables   map[string]uintptr // device tables of multi-tensor ops, by content
	stage    unsafe.Pointer     // pinned staging for table uploads
	stageCap int

	capturing bool
	prof      profiler
	cnt       kernels.Counters
	cp        *copier     // the copy stream of asynchronous moves (mover.go), nil until the first
	side      *sideStream // the second compute stream (fork.go)
	oneStream bool        // tests only: the serial order the side stream is checked against
}

var _ kernels.Backend = (*Backend)(nil)

// New opens device ordinal dev: retains its primary context, creates a
// non-blocking stream and loads the kernels (embedded PTX, or the files in
// $RESNETLAB_PTX_DIR when set).
func New(dev int) (*Backend, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if n := DeviceCount(); dev < 0 || dev >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d devices)", dev, n)
	}
	b := &Backend{ordinal: dev, TF32: os.Getenv("RESNETLAB_TF32") != "0",
		tables: map[string]uintptr{}}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.open(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Backend) open() error {
	if err := call("cuDeviceGet", drv.cuDeviceGet, uintptr(unsafe.Pointer(&b.dev)), uintptr(b.ordinal)); err != nil {
		return err
	}
	var name [256]byte
	if err := call("cuDeviceGetName", drv.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), 255, uintptr(b.dev)); err != nil {
		return err
	}
	b.name = goString(&name[0])
	var total uint64
	if err := call("cuDeviceTotalMem_v2", drv.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(b.dev)); err != nil {
		return err
	}
	b.capacity = int64(total)
	var sms int32
	if err := call("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", drv.cuDeviceGetAttribute,
		uintptr(unsafe.Pointer(&sms)), attrMultiprocessorCount, uintptr(b.dev)); err != nil {
		return err
	}
	b.sms = int(sms)
	if err := call("cuDevicePrimaryCtxRetain", drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&b.ctx)), uintptr(b.dev)); err != nil {
		return err
	}
	if err := call("cuCtxSetCurrent", drv.cuCtxSetCurrent, b.ctx); err != nil {
		return err
	}
	if err := call("cuStreamCreate", drv.cuStreamCreate, uintptr(unsafe.Pointer(&b.stream)), streamNonBlocking); err != nil {
		return err
	}
	if err := b.openSide(); err != nil {
		return err
	}
	if err := b.args.init(); err != nil {
		return err
	}
	if err := call("cuMemAllocHost_v2(flag)", drv.cuMemAllocHost, uintptr(unsafe.Pointer(&b.host)), 64); err != nil {
		return err
	}
	if err := call("cuMemAlloc_v2(flag)", drv.cuMemAlloc, uintptr(unsafe.Pointer(&b.flag)), 256); err != nil {
		return err
	}
	b.alloc.init(b)
	mods, err := loadModules()
	b.mod = mods
	if err != nil {
		return err
	}
	return mods.require(requiredKernels)
}

// requiredKernels are kernels whose absence New reports at once rather than
// as a panic at the first launch: the newest of each source file, which a
// RESNETLAB_PTX_DIR set generated from older sources lacks.
var requiredKernels = []string{
	"adam_copy", "conv_fwd_f16_vec", "conv_taps", "conv_flip", "dense_bwdw_f16",
	"bn_act_fwd_train", "bn_act_fwd_eval", "bn_act_bwd",
}

// Close frees every device allocation, the streams and the context
// reference. The Backend and its tensors must not be used afterwards.
func (b *Backend) Close() {
	if b.ctx == 0 {
		return
	}
	defer b.bind()()
	if b.stream != 0 {
		_ = call("cuStreamSynchronize", drv.cuStreamSynchronize, b.stream)
	}
	b.closeSide()
	b.closeCopier()
	b.alloc.releaseAll()
	b.destroyProfEvents()
	for _, p := range b.tables {
		_ = call("cuMemFree_v2(table)", drv.cuMemFree, p)
	}
	b.tables = nil
	if b.mod != nil {
		b.mod.unload()
	}
	if b.flag != 0 {
		_ = call("cuMemFree_v2(flag)", drv.cuMemFree, b.flag)
	}
	if b.stage != nil {
		_ = call("cuMemFreeHost", drv.cuMemFreeHost, uintptr(b.stage))
	}
	if b.host != nil {
		_ = call("cuMemFreeHost", drv.cuMemFreeHost, uintptr(b.host))
	}
	b.args.free()
	if b.stream != 0 {
		_ = call("cuStreamDestroy_v2", drv.cuStreamDestroy, b.stream)
	}
	_ = call("cuDevicePrimaryCtxRelease_v2", drv.cuDevicePrimaryCtxRelease, uintptr(b.dev))
	b.ctx = 0
}

// bind makes the context current on this OS thread and pins the goroutine
// to the thread until the returned function runs: driver calls act on the
// calling thread's current context, and goroutines move between threads.
func (b *Backend) bind() func() {
	runtime.LockOSThread()
	must("cuCtxSetCurrent", drv.cuCtxSetCurrent, b.ctx)
	return runtime.UnlockOSThread
}

func (b *Backend) Name() string { return "cuda" }

// Device is the GPU's name and ordinal, e.g. "NVIDIA H200 #0".
func (b *Backend) Device() string { return fmt.Sprintf("%s #%d", b.name, b.ordinal) }

// Capacity is the device's memory size in bytes.
func (b *Backend) Capacity() int64 { return b.capacity }

// Sync waits for all queued work, copies and the side stream included;
// asynchronous kernel faults surface here.
func (b *Backend) Sync() error {
	defer b.bind()()
	if b.capturing {
		return fmt.Errorf("cuda: Sync during graph capture (end the capture first)")
	}
	b.cnt.Syncs++
	if b.cp != nil {
		if err := call("cuStreamSynchronize(copy)", drv.cuStreamSynchronize, b.cp.stream); err != nil {
			return err
		}
	}
	if b.side != nil && b.side.stream != 0 {
		// Idle outside an op (every fork is joined before the op returns);
		// waited for anyway so that a fault there surfaces here too.
		if err := call("cuStreamSynchronize(side)", drv.cuStreamSynchronize, b.side.stream); err != nil {
			return err
		}
	}
	return call("cuStreamSynchronize", drv.cuStreamSynchronize, b.stream)
}

// Event timing, for benchmarks: Record marks the stream, Elapsed waits for
// the later event and returns the milliseconds between two marks.
type Event struct{ h uintptr }

// Record places a new event on the stream.
func (b *Backend) Record() Event {
	defer b.bind()()
	var e Event
	must("cuEventCreate", drv.cuEventCreate, uintptr(unsafe.Pointer(&e.h)), eventDefault)
	must("cuEventRecord", drv.cuEventRecord, e.h, b.stream)
	return e
}

// Elapsed returns the milliseconds from start to end and destroys both.
func (b *Backend) Elapsed(start, end Event) float32 {
	defer b.bind()()
	b.cnt.Syncs++
	must("cuEventSynchronize", drv.cuEventSynchronize, end.h)
	var ms float32
	must("cuEventElapsedTime", drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.h, end.h)
	must("cuEventDestroy_v2", drv.cuEventDestroy, start.h)
	must("cuEventDestroy_v2", drv.cuEventDestroy, end.h)
	return ms
}
