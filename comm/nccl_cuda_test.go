package comm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"resnetlab/kernels"

	"resnetlab/internal/testutil"
)

// A few CUDA driver calls, for testing the NCCL binding on a GPU machine
// without depending on the CUDA backend. Tests skip where there is no GPU.
type cudaDriver struct {
	init          func(flags uint32) int32
	deviceCount   func(n *int32) int32
	deviceGet     func(dev *int32, ordinal int32) int32
	primaryRetain func(ctx *uintptr, dev int32) int32
	setCurrent    func(ctx uintptr) int32
	alloc         func(p *uintptr, bytes uintptr) int32
	free          func(p uintptr) int32
	htod          func(dst uintptr, src unsafe.Pointer, bytes uintptr) int32
	dtoh          func(dst unsafe.Pointer, src uintptr, bytes uintptr) int32
	sync          func() int32
	ctxs          []uintptr // primary context per device
}

func loadCUDA(t *testing.T) *cudaDriver {
	t.Helper()
	h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Skip("no CUDA driver: ", err)
	}
	d := &cudaDriver{}
	for name, fn := range map[string]any{
		"cuInit": &d.init, "cuDeviceGetCount": &d.deviceCount, "cuDeviceGet": &d.deviceGet,
		"cuDevicePrimaryCtxRetain": &d.primaryRetain, "cuCtxSetCurrent": &d.setCurrent,
		"cuMemAlloc_v2": &d.alloc, "cuMemFree_v2": &d.free, "cuMemcpyHtoD_v2": &d.htod,
		"cuMemcpyDtoH_v2": &d.dtoh, "cuCtxSynchronize": &d.sync,
	} {
		purego.RegisterLibFunc(fn, h, name)
	}
	var n int32
	if r := d.init(0); r != 0 {
		t.Skipf("cuInit: CUDA error %d", r)
	}
	if r := d.deviceCount(&n); r != 0 || n == 0 {
		t.Skipf("no GPU (cuDeviceGetCount: %d devices, error %d)", n, r)
	}
	runtime.LockOSThread() // contexts are per OS thread
	t.Cleanup(runtime.UnlockOSThread)
	for i := range n {
		var dev int32
		var ctx uintptr
		cuOK(t, "cuDeviceGet", d.deviceGet(&dev, i))
		cuOK(t, "cuDevicePrimaryCtxRetain", d.primaryRetain(&ctx, dev))
		d.ctxs = append(d.ctxs, ctx)
	}
	d.use(t, 0)
	return d
}

func cuOK(t *testing.T, what string, r int32) {
	t.Helper()
	if r != 0 {
		t.Fatalf("%s: CUDA error %d", what, r)
	}
}

func (d *cudaDriver) use(t *testing.T, dev int) {
	cuOK(t, "cuCtxSetCurrent", d.setCurrent(d.ctxs[dev]))
}

func (d *cudaDriver) upload(t *testing.T, xs []float32) uintptr {
	t.Helper()
	var p uintptr
	cuOK(t, "cuMemAlloc", d.alloc(&p, uintptr(4*len(xs))))
	cuOK(t, "cuMemcpyHtoD", d.htod(p, unsafe.Pointer(&xs[0]), uintptr(4*len(xs))))
	return p
}

func (d *cudaDriver) download(t *testing.T, p uintptr, n int) []float32 {
	t.Helper()
	cuOK(t, "cuCtxSynchronize", d.sync())
	xs := make([]float32, n)
	cuOK(t, "cuMemcpyDtoH", d.dtoh(unsafe.Pointer(&xs[0]), p, uintptr(4*n)))
	return xs
}

func loadNCCLOrSkip(t *testing.T) *NCCL {
	l, err := LoadNCCL()
	if err != nil {
		t.Skip(err)
	}
	return l
}

func ramp(n int, base float32) []float32 {
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = base + float32(i)
	}
	return xs
}

// TestNCCLOneRank checks the binding on one GPU: a one-rank communicator
// made with CommInitRank (the 128-byte id passed by value) copies exactly
// count elements of the given type for every collective.
func TestNCCLOneRank(t *testing.T) {
	d := loadCUDA(t)
	l := loadNCCLOrSkip(t)
	v, err := l.Version()
	if err != nil || v < 20000 {
		t.Fatalf("version %d, %v", v, err)
	}
	t.Logf("NCCL %d from %s", v, l.Path)
	if got := libcGetenv(t, "NCCL_NVLS_ENABLE"); got != "0" {
		t.Fatalf("libc sees NCCL_NVLS_ENABLE=%q, want 0", got)
	}
	id1, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if id2, _ := l.GetUniqueID(); id1 == id2 || id1 == (UniqueID{}) {
		t.Fatal("GetUniqueID returned a zero or repeated id")
	}
	comm, err := l.CommInitRank(1, id1, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	send := d.upload(t, ramp(n, 1))
	recv := d.upload(t, make([]float32, n))
	steps := []struct {
		name  string
		call  func() error
		count int // float32 slots written
	}{
		{"AllReduce sum", func() error { return comm.AllReduce(send, recv, 10, NCCLFloat32, Sum, 0) }, 10},
		{"AllReduce avg fp16", func() error { return comm.AllReduce(send, recv, 12, NCCLFloat16, Avg, 0) }, 6},
		{"ReduceScatter", func() error { return comm.ReduceScatter(send, recv, 20, NCCLFloat32, Sum, 0) }, 20},
		{"AllGather bf16", func() error { return comm.AllGather(send, recv, 30, NCCLBfloat16, 0) }, 15},
		{"Broadcast", func() error { return comm.Broadcast(send, recv, 40, NCCLFloat32, 0, 0) }, 40},
	}
	for _, s := range steps {
		d.htod(recv, unsafe.Pointer(&make([]float32, n)[0]), 4*n)
		if err := s.call(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := d.download(t, recv, n)
		want := append(ramp(s.count, 1), make([]float32, n-s.count)...)
		if err := testutil.DiffBits(s.name, got, want); err != nil {
			t.Fatal(err)
		}
	}
	err = comm.AllReduce(send, recv, 4, NCCLDataType(99), Sum, 0)
	var ne *NCCLError
	if !errors.As(err, &ne) || ne.Result != 4 || !strings.Contains(err.Error(), "ncclInvalidArgument") {
		t.Fatalf("bad datatype: %v, want ncclInvalidArgument", err)
	}
	testNCCLTensors(t, d, comm)
	world, err := JoinWorld(context.Background(), Env{WorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: freePort(t)}, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	solo, err := l.CommOfWorld(world) // the unique id through the store
	if err != nil || solo.WorldSize() != 1 {
		t.Fatalf("CommOfWorld for one process: %v", err)
	}
	if err := solo.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := comm.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := comm.AllReduce(send, recv, 1, NCCLFloat32, Sum, 0); !errors.Is(err, ErrNoNCCLComm) {
		t.Fatalf("collective after Destroy: %v", err)
	}
	d.free(send)
	d.free(recv)
}

// testNCCLTensors runs the DeviceCommunicator adapter on a one-rank comm.
func testNCCLTensors(t *testing.T, d *cudaDriver, comm *NCCLComm) {
	var dc DeviceCommunicator = comm.OnStream(0)
	x := &kernels.Tensor{Shape: []int{8}, Dev: d.upload(t, ramp(8, 3))}
	y := &kernels.Tensor{Shape: []int{8}, Dev: d.upload(t, make([]float32, 8))}
	for _, err := range []error{dc.AllReduce(x, Avg), dc.ReduceScatter(y, x, Sum), dc.Broadcast(y, 0)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := testutil.DiffBits("tensor collectives", d.download(t, y.Dev, 8), ramp(8, 3)); err != nil {
		t.Fatal(err)
	}
	if err := dc.AllGather(&kernels.Tensor{Shape: []int{16}, Dev: y.Dev}, x); err == nil {
		t.Fatal("AllGather into a tensor of the wrong size gave no error")
	}
	if err := dc.AllReduce(&kernels.Tensor{Shape: []int{4}, Host: make([]float32, 4)}, Sum); err == nil {
		t.Fatal("AllReduce of a CPU tensor gave no error")
	}
}

// TestNCCLAllDevices sums across every local GPU with CommInitAll and one
// group of calls from this goroutine (skipped with fewer than 2 GPUs).
func TestNCCLAllDevices(t *testing.T) {
	d := loadCUDA(t)
	l := loadNCCLOrSkip(t)
	w := len(d.ctxs)
	if w < 2 {
		t.Skip("needs 2 GPUs, found ", w)
	}
	devs := make([]int, w)
	for i := range devs {
		devs[i] = i
	}
	comms, err := l.CommInitAll(devs)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1001
	bufs := make([]uintptr, w)
	xs := make([][]float32, w)
	for r := range w {
		d.use(t, r)
		xs[r] = ramp(n, float32(100*r))
		bufs[r] = d.upload(t, xs[r])
	}
	if err := l.GroupStart(); err != nil {
		t.Fatal(err)
	}
	for r, c := range comms {
		if err := c.AllReduce(bufs[r], bufs[r], n, NCCLFloat32, Sum, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.GroupEnd(); err != nil {
		t.Fatal(err)
	}
	want := seqReduce(xs, Sum) // integers: exact in any order
	for r, c := range comms {
		d.use(t, r)
		if err := testutil.DiffBits(fmt.Sprintf("rank %d", r), d.download(t, bufs[r], n), want); err != nil {
			t.Fatal(err)
		}
		c.Destroy()
	}
}

func libcGetenv(t *testing.T, name string) string {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	if err != nil {
		t.Fatal(err)
	}
	var getenv func(name string) string
	purego.RegisterLibFunc(&getenv, h, "getenv")
	return getenv(name)
}
