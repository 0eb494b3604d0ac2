package cuda

import (
	"testing"

	"resnetlab/kernels"
)

// Workspace released between a fork and its join is held back, not put on
// a free list where the other stream's next allocation would find it
// (no device needed: the allocator's bookkeeping only).
func TestReleaseHeldWhileForked(t *testing.T) {
	b := &Backend{}
	b.alloc.init(b)
	const p, n = uintptr(0x1000), int64(300)
	b.alloc.live[p] = sizeClass(n)
	b.alloc.account(kernels.CatWorkspace, n)
	b.side = &sideStream{forked: true}
	b.release(p, n)
	if len(b.alloc.free[sizeClass(n)]) != 0 {
		t.Fatal("a block released while forked went on the free list")
	}
	if len(b.side.held) != 1 || b.side.held[0] != (heldBlock{p, n}) {
		t.Fatalf("held %v, want the released block", b.side.held)
	}
	if _, ok := b.alloc.live[p]; !ok || b.alloc.inUse[kernels.CatWorkspace] != n {
		t.Fatal("a held block must stay live and accounted until the join")
	}
	b.side.forked = false
	b.side.held = nil
	b.release(p, n)
	if l := b.alloc.free[sizeClass(n)]; len(l) != 1 || l[0] != p {
		t.Fatalf("outside a fork release must free at once: free list %v", l)
	}
}
