package comm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// The NCCL binding: libnccl.so.2 is loaded at run time through purego, so
// the binary stays pure Go (CGO_ENABLED=0) and runs where NCCL is absent.
// Device pointers and streams are uintptr (CUdeviceptr, CUstream) owned by
// the CUDA backend. NCCL calls use the CUDA context current on the calling
// OS thread: the rank's goroutine must be locked to its thread
// (runtime.LockOSThread) with its device's primary context current.

// NCCLLibName is the library LoadNCCL opens.
const NCCLLibName = "libnccl.so.2"

// UniqueID is ncclUniqueId: 128 opaque bytes made by ncclGetUniqueId on one
// rank and handed to all ranks (CommOfWorld, through the store) for ncclCommInitRank.
type UniqueID [128]byte

// ncclUniqueID is UniqueID as a C struct, which purego passes by value
// (on the stack, as the x86-64 System V ABI does for a 128-byte struct).
type ncclUniqueID struct{ B [128]byte }

// NCCLResult is ncclResult_t.
type NCCLResult int32

var ncclResultNames = [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
	"ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"}

func (r NCCLResult) String() string {
	if r >= 0 && int(r) < len(ncclResultNames) {
		return ncclResultNames[r]
	}
	return fmt.Sprintf("ncclResult(%d)", int32(r))
}

// NCCLError is a failed NCCL call.
type NCCLError struct {
	Func   string
	Result NCCLResult
	Msg    string // ncclGetErrorString
}

func (e *NCCLError) Error() string {
	return fmt.Sprintf("nccl: %s failed: %s (%d): %s", e.Func, e.Result, int32(e.Result), e.Msg)
}

// NCCLDataType is ncclDataType_t.
type NCCLDataType int32

const (
	NCCLFloat16  NCCLDataType = 6
	NCCLFloat32  NCCLDataType = 7
	NCCLBfloat16 NCCLDataType = 9
)

// ncclRedOp maps Op to ncclRedOp_t (ncclSum = 0, ncclAvg = 4).
func ncclRedOp(op Op) (int32, error) {
	switch op {
	case Sum:
		return 0, nil
	case Avg:
		return 4, nil
	}
	return 0, fmt.Errorf("nccl: unknown reduction op %d (want Sum or Avg)", uint8(op))
}

// NCCL is the loaded library.
type NCCL struct {
	Path string // the file that was opened

	getVersion    func(version *int32) NCCLResult
	getUniqueID   func(id *UniqueID) NCCLResult
	commInitRank  func(comm *uintptr, nranks int32, id ncclUniqueID, rank int32) NCCLResult
	commInitAll   func(comms *uintptr, ndev int32, devlist *int32) NCCLResult
	commDestroy   func(comm uintptr) NCCLResult
	commAbort     func(comm uintptr) NCCLResult
	allReduce     func(send, recv, count uintptr, dt NCCLDataType, op int32, comm, stream uintptr) NCCLResult
	reduceScatter func(send, recv, recvCount uintptr, dt NCCLDataType, op int32, comm, stream uintptr) NCCLResult
	allGather     func(send, recv, sendCount uintptr, dt NCCLDataType, comm, stream uintptr) NCCLResult
	broadcast     func(send, recv, count uintptr, dt NCCLDataType, root int32, comm, stream uintptr) NCCLResult
	groupStart    func() NCCLResult
	groupEnd      func() NCCLResult
	errorString   func(r NCCLResult) string
}

var (
	ncclOnce sync.Once
	ncclLib  *NCCL
	ncclErr  error
)

// LoadNCCL opens libnccl.so.2 once per process (from
// /usr/lib/x86_64-linux-gnu, then each LD_LIBRARY_PATH directory, then the
// dynamic loader's own search) and binds its functions. On a machine
// without NCCL it returns an error that lists every place it looked.
//
// It first sets NCCL_NVLS_ENABLE=0 in the process environment, overriding
// any value: NCCL must never use NVLink SHARP / multicast (NVLS). On the
// shared hosts we run on, a program that creates NVLink multicast objects
// can put the host's GPUs, which other users share, out of service for a
// day or more; and the in-place reductions we need run fine over plain
// NVLink/PCIe rings and trees.
func LoadNCCL() (*NCCL, error) {
	ncclOnce.Do(func() { ncclLib, ncclErr = loadNCCL() })
	return ncclLib, ncclErr
}

func ncclCandidates() []string {
	c := []string{filepath.Join("/usr/lib/x86_64-linux-gnu", NCCLLibName)}
	for _, dir := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
		if dir != "" {
			c = append(c, filepath.Join(dir, NCCLLibName))
		}
	}
	return append(c, NCCLLibName)
}

// dlopenLocked keeps dlopen and dlerror on one OS thread (dlerror's text
// is thread-local; a moved goroutine read an empty one).
func dlopenLocked(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func loadNCCL() (*NCCL, error) {
	// NCCL reads its environment when it initialises; set it before dlopen.
	// (purego routes os.Setenv to libc's setenv, so NCCL's getenv sees it.)
	if err := os.Setenv("NCCL_NVLS_ENABLE", "0"); err != nil {
		return nil, fmt.Errorf("nccl: setting NCCL_NVLS_ENABLE=0: %w", err)
	}
	var tried []string
	for _, path := range ncclCandidates() {
		h, err := dlopenLocked(path)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		l := &NCCL{Path: path}
		if err := l.bind(h); err != nil {
			return nil, fmt.Errorf("nccl: %s: %w", path, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("nccl: cannot load %s (multi-GPU needs NCCL 2; set LD_LIBRARY_PATH to its folder): tried %s",
		NCCLLibName, strings.Join(tried, "; "))
}

func (l *NCCL) bind(h uintptr) error {
	syms := []struct {
		fn   any
		name string
	}{
		{&l.getVersion, "ncclGetVersion"}, {&l.getUniqueID, "ncclGetUniqueId"},
		{&l.commInitRank, "ncclCommInitRank"}, {&l.commInitAll, "ncclCommInitAll"},
		{&l.commDestroy, "ncclCommDestroy"}, {&l.commAbort, "ncclCommAbort"},
		{&l.allReduce, "ncclAllReduce"}, {&l.reduceScatter, "ncclReduceScatter"},
		{&l.allGather, "ncclAllGather"}, {&l.broadcast, "ncclBroadcast"},
		{&l.groupStart, "ncclGroupStart"}, {&l.groupEnd, "ncclGroupEnd"},
		{&l.errorString, "ncclGetErrorString"},
	}
	for _, s := range syms {
		addr, err := purego.Dlsym(h, s.name)
		if err != nil {
			return fmt.Errorf("missing symbol %s: %w", s.name, err)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	return nil
}

func (l *NCCL) check(fn string, r NCCLResult) error {
	if r == 0 {
		return nil
	}
	return &NCCLError{Func: fn, Result: r, Msg: l.errorString(r)}
}

// Version is NCCL's version code, e.g. 22703 for 2.27.3.
func (l *NCCL) Version() (int, error) {
	var v int32
	err := l.check("ncclGetVersion", l.getVersion(&v))
	return int(v), err
}

// GetUniqueID makes the id that all ranks of one communicator share; call
// it on rank 0 only and hand it to the others.
func (l *NCCL) GetUniqueID() (UniqueID, error) {
	var id UniqueID
	err := l.check("ncclGetUniqueId", l.getUniqueID(&id))
	return id, err
}

// GroupStart and GroupEnd bracket calls that must be issued together, e.g.
// CommInitRank for several local GPUs from one goroutine.
func (l *NCCL) GroupStart() error { return l.check("ncclGroupStart", l.groupStart()) }
func (l *NCCL) GroupEnd() error   { return l.check("ncclGroupEnd", l.groupEnd()) }

// ErrNoNCCLComm is returned for a collective on a destroyed communicator.
var ErrNoNCCLComm = errors.New("nccl: communicator destroyed")
