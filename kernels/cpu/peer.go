package cpu

import (
	"fmt"

	"resnetlab/kernels"
)

var _ kernels.Peer = (*Backend)(nil)

// CopyPeer copies src into dst; either may belong to another CPU backend
// (another rank). Values are copied as stored: both have the same dtype,
// so they are already rounded to it.
func (b *Backend) CopyPeer(dst, src *kernels.Tensor) {
	b.check(dst, "CopyPeer dst")
	b.check(src, "CopyPeer src")
	sameLen("CopyPeer", dst, src)
	if dst.DType != src.DType {
		panic(fmt.Sprintf("cpu: CopyPeer: dtypes differ: %v and %v", dst, src))
	}
	copy(dst.Host, src.Host)
}

// Fences are no-ops: every op has completed when it returns, so whatever
// a peer signalled is already done.
func (b *Backend) NewFence() kernels.Fence { return 0 }
func (b *Backend) FreeFence(kernels.Fence) {}
func (b *Backend) Signal(kernels.Fence)    {}
func (b *Backend) WaitFence(kernels.Fence) {}
