package cuda

import (
	"fmt"
	"unsafe"

	"resnetlab/kernels"
)

// Cross-rank data movement for comm.DeviceComm: ranks of one process
// each have a Backend (own stream) on the same device, sharing its primary
// context, or on different devices. A rank copies a peer's tensor with a
// device copy on its own stream, and orders that copy after the peer's
// producing ops with an event (Signal on the peer's stream, WaitFence on
// its own): the host never waits.

var _ kernels.Peer = (*Backend)(nil)

// CopyPeer copies src into dst on b's stream; one of them is b's, the other
// may belong to another CUDA backend of this process. Within one context
// (ranks sharing a GPU) it is cuMemcpyDtoDAsync; across devices
// cuMemcpyPeerAsync, which uses NVLink/PCIe peer access where the driver
// has it and stages through the host where it does not.
func (b *Backend) CopyPeer(dst, src *kernels.Tensor) {
	defer b.bind()()
	db, sb := peerOwner("dst", dst), peerOwner("src", src)
	if db != b && sb != b {
		panic(fmt.Sprintf("cuda: CopyPeer: neither %v nor %v belongs to this backend", dst, src))
	}
	n := sameLen("CopyPeer", dst, src)
	if dst.DType != src.DType {
		panic(fmt.Sprintf("cuda: CopyPeer: dtypes differ: %v and %v", dst, src))
	}
	if n == 0 || dst.Dev == src.Dev {
		return
	}
	if db.ctx == sb.ctx {
		must("cuMemcpyDtoDAsync_v2(peer)", drv.cuMemcpyDtoDAsync, dst.Dev, src.Dev, uintptr(dst.Bytes()), b.stream)
		return
	}
	must("cuMemcpyPeerAsync", drv.cuMemcpyPeerAsync, dst.Dev, db.ctx, src.Dev, sb.ctx, uintptr(dst.Bytes()), b.stream)
}

// peerOwner is the CUDA backend that owns t; it panics for a freed tensor
// or one of another kind of backend.
func peerOwner(what string, t *kernels.Tensor) *Backend {
	o, ok := t.Owner.(*Backend)
	if !ok || o == nil {
		panic(fmt.Sprintf("cuda: CopyPeer: %s %v does not belong to a CUDA backend", what, t))
	}
	if t.Dev == 0 && t.Len() > 0 {
		panic(fmt.Sprintf("cuda: CopyPeer: %s %v was freed", what, t))
	}
	return o
}

// NewFence creates an event without timing (the cheapest kind to record
// and wait on).
func (b *Backend) NewFence() kernels.Fence {
	defer b.bind()()
	var e uintptr
	must("cuEventCreate(fence)", drv.cuEventCreate, uintptr(unsafe.Pointer(&e)), eventDisableTiming)
	return kernels.Fence(e)
}

// FreeFence destroys the event (pending waits on it still complete).
func (b *Backend) FreeFence(f kernels.Fence) {
	if f == 0 {
		return
	}
	defer b.bind()()
	_ = call("cuEventDestroy_v2(fence)", drv.cuEventDestroy, uintptr(f))
}

// Signal records the event on b's stream.
func (b *Backend) Signal(f kernels.Fence) {
	defer b.bind()()
	must("cuEventRecord(fence)", drv.cuEventRecord, uintptr(f), b.stream)
}

// WaitFence makes b's stream wait for the event's last record, which may be
// on another backend's stream, context or device.
func (b *Backend) WaitFence(f kernels.Fence) {
	defer b.bind()()
	must("cuStreamWaitEvent", drv.cuStreamWaitEvent, b.stream, uintptr(f), 0)
}

// Stream is the backend's CUstream, for libraries that enqueue on it
// (NCCL).
func (b *Backend) Stream() uintptr { return b.stream }

// Bind makes b's context current on the calling OS thread and locks the
// goroutine to it until the returned function is called: calls into
// libraries that use the current context (NCCL) go between the two.
func (b *Backend) Bind() (release func()) { return b.bind() }
