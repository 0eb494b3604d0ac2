package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// drv holds the driver entry points, resolved once by loadDriver.
var drv struct {
	cuInit, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceTotalMem       uintptr
	cuDeviceGetAttribute, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease      uintptr
	cuCtxSetCurrent, cuMemAlloc, cuMemFree, cuMemAllocHost, cuMemFreeHost          uintptr
	cuMemcpyHtoD, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync          uintptr
	cuMemsetD8Async, cuStreamCreate, cuStreamDestroy, cuStreamSynchronize          uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime           uintptr
	cuEventDestroy, cuModuleLoadData, cuModuleGetFunction, cuModuleUnload          uintptr
	cuLaunchKernel, cuGetErrorName, cuStreamBeginCapture, cuStreamEndCapture       uintptr
	cuGraphInstantiateWithFlags, cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy uintptr
	cuMemcpyPeerAsync, cuStreamWaitEvent                                           uintptr
	cuEventRecordWithFlags, cuEventQuery                                           uintptr
}

// symbols maps each entry point to its versioned driver symbol.
var symbols = []struct {
	dst  *uintptr
	name string
}{
	{&drv.cuInit, "cuInit"},
	{&drv.cuDeviceGetCount, "cuDeviceGetCount"},
	{&drv.cuDeviceGet, "cuDeviceGet"},
	{&drv.cuDeviceGetName, "cuDeviceGetName"},
	{&drv.cuDeviceTotalMem, "cuDeviceTotalMem_v2"},
	{&drv.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
	{&drv.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
	{&drv.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
	{&drv.cuCtxSetCurrent, "cuCtxSetCurrent"},
	{&drv.cuMemAlloc, "cuMemAlloc_v2"},
	{&drv.cuMemFree, "cuMemFree_v2"},
	{&drv.cuMemAllocHost, "cuMemAllocHost_v2"},
	{&drv.cuMemFreeHost, "cuMemFreeHost"},
	{&drv.cuMemcpyHtoD, "cuMemcpyHtoD_v2"},
	{&drv.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
	{&drv.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
	{&drv.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"},
	{&drv.cuMemsetD8Async, "cuMemsetD8Async"},
	{&drv.cuStreamCreate, "cuStreamCreate"},
	{&drv.cuStreamDestroy, "cuStreamDestroy_v2"},
	{&drv.cuStreamSynchronize, "cuStreamSynchronize"},
	{&drv.cuEventCreate, "cuEventCreate"},
	{&drv.cuEventRecord, "cuEventRecord"},
	{&drv.cuEventSynchronize, "cuEventSynchronize"},
	{&drv.cuEventElapsedTime, "cuEventElapsedTime"},
	{&drv.cuEventDestroy, "cuEventDestroy_v2"},
	{&drv.cuModuleLoadData, "cuModuleLoadData"},
	{&drv.cuModuleGetFunction, "cuModuleGetFunction"},
	{&drv.cuModuleUnload, "cuModuleUnload"},
	{&drv.cuLaunchKernel, "cuLaunchKernel"},
	{&drv.cuGetErrorName, "cuGetErrorName"},
	{&drv.cuStreamBeginCapture, "cuStreamBeginCapture_v2"},
	{&drv.cuStreamEndCapture, "cuStreamEndCapture"},
	{&drv.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"},
	{&drv.cuGraphLaunch, "cuGraphLaunch"},
	{&drv.cuGraphExecDestroy, "cuGraphExecDestroy"},
	{&drv.cuGraphDestroy, "cuGraphDestroy"},
	{&drv.cuMemcpyPeerAsync, "cuMemcpyPeerAsync"},
	{&drv.cuStreamWaitEvent, "cuStreamWaitEvent"},
	{&drv.cuEventRecordWithFlags, "cuEventRecordWithFlags"},
	{&drv.cuEventQuery, "cuEventQuery"},
}

// Driver constants used here (cuda.h).
const (
	errOutOfMemory          = 2
	attrMultiprocessorCount = 16
	streamNonBlocking       = 1
	captureModeRelaxed      = 2
	eventDefault            = 0
	eventDisableTiming      = 2
	eventRecordExternal     = 1 // CU_EVENT_RECORD_EXTERNAL: a timing node in a captured graph
	errNotReady             = 600
)

// Error is a failed driver call: the call and the CUresult's name.
type Error struct {
	Call string // e.g. "cuMemAlloc_v2(1048576 bytes)"
	Code int    // the CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s failed: %s (%d)", e.Call, e.Name, e.Code)
}

var (
	loadOnce sync.Once
	loadErr  error
)

// loadDriver opens libcuda.so.1, resolves every symbol and runs cuInit.
func loadDriver() error {
	loadOnce.Do(func() {
		lib, err := dlopen("libcuda.so.1")
		if err != nil {
			loadErr = fmt.Errorf("cuda: cannot load libcuda.so.1 (no NVIDIA driver?): %v", err)
			return
		}
		for _, s := range symbols {
			p, err := purego.Dlsym(lib, s.name)
			if err != nil {
				loadErr = fmt.Errorf("cuda: libcuda.so.1 lacks %s (driver too old?): %v", s.name, err)
				return
			}
			*s.dst = p
		}
		loadErr = call("cuInit", drv.cuInit, 0)
	})
	return loadErr
}

// dlopen wraps purego.Dlopen on one locked OS thread: dlerror's message is
// thread-local, and a goroutine moved between the dlopen and the dlerror
// call reported an empty reason.
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// call invokes a driver function and turns a non-zero CUresult into *Error.
// uintptrescapes keeps Go memory behind pointer-derived arguments alive and
// in place for the duration of the call.
//
//go:uintptrescapes
func call(what string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	if r != 0 {
		return &Error{Call: what, Code: int(r), Name: errorName(r)}
	}
	return nil
}

// must is call for operations whose failure leaves the backend unusable;
// Backend methods have no error results, so they panic with the *Error.
//
//go:uintptrescapes
func must(what string, fn uintptr, args ...uintptr) {
	r, _, _ := purego.SyscallN(fn, args...)
	if r != 0 {
		panic(&Error{Call: what, Code: int(r), Name: errorName(r)})
	}
}

// errorName asks the driver for a CUresult's name.
func errorName(code uintptr) string {
	var p *byte
	r, _, _ := purego.SyscallN(drv.cuGetErrorName, code, uintptr(unsafe.Pointer(&p)))
	if r != 0 || p == nil {
		return fmt.Sprintf("CUresult %d", code)
	}
	return goString(p)
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

// Available says in one line why the CUDA backend cannot run here, or nil.
func Available() error {
	if err := loadDriver(); err != nil {
		return err
	}
	if DeviceCount() == 0 {
		return fmt.Errorf("cuda: the driver loaded but reports no CUDA device")
	}
	return nil
}

// DeviceCount is the number of CUDA devices, 0 when the driver is missing.
func DeviceCount() int {
	if loadDriver() != nil {
		return 0
	}
	var n int32
	if call("cuDeviceGetCount", drv.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))) != nil {
		return 0
	}
	return int(n)
}
