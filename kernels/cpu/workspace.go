package cpu

import "resnetlab/kernels"

// Scratch slots: each op-level buffer has its own slot so that buffers live
// at the same time never share storage.
const (
	slotCol   = iota // im2col / col2im columns
	slotT            // a transposed copy of an activation (conv)
	slotPackA        // GEMM packed A panels
	slotPackB        // GEMM packed B panels
	slotTiles        // GEMM per-worker edge tiles
	slotW            // conv weights compacted to the live taps
	slotDW           // conv weight gradient over the live taps
	slotWT           // conv weights flipped and transposed (stride-1 dx)
	slotXP           // zero-padded conv input
	numSlots
)

// workspace caches scratch buffers across calls so training does not
// allocate per step. Bytes are charged to CatWorkspace only while an op
// holds them, so the peak shows each op's real workspace need.
type workspace struct {
	bufs    [numSlots][]float32
	charged [numSlots]int64 // bytes charged by the op in flight, per slot
	idx     [numIdxSlots][]int32
	idxCh   [numIdxSlots]int64
}

// Index scratch slots (int32 tables).
const (
	slotBase = iota // conv: window corner per output pixel
	slotOff         // conv: offset per (channel, tap)
	numIdxSlots
)

// scratch returns n float32s of slot (contents undefined) and charges them
// to the running op. Callers release with releaseScratch.
func (b *Backend) scratch(slot, n int) []float32 {
	ws := &b.ws
	if cap(ws.bufs[slot]) < n {
		ws.bufs[slot] = make([]float32, n)
	}
	if bytes := int64(n) * 4; bytes > ws.charged[slot] {
		b.account(kernels.CatWorkspace, bytes-ws.charged[slot])
		ws.charged[slot] = bytes
	}
	return ws.bufs[slot][:n]
}

// scratchIdx is scratch for int32 index tables.
func (b *Backend) scratchIdx(slot, n int) []int32 {
	ws := &b.ws
	if cap(ws.idx[slot]) < n {
		ws.idx[slot] = make([]int32, n)
	}
	if bytes := int64(n) * 4; bytes > ws.idxCh[slot] {
		b.account(kernels.CatWorkspace, bytes-ws.idxCh[slot])
		ws.idxCh[slot] = bytes
	}
	return ws.idx[slot][:n]
}

// releaseScratch un-charges every slot used by the op that ends.
func (b *Backend) releaseScratch() {
	var total int64
	for i, c := range b.ws.charged {
		total += c
		b.ws.charged[i] = 0
	}
	for i, c := range b.ws.idxCh {
		total += c
		b.ws.idxCh[i] = 0
	}
	if total != 0 {
		b.account(kernels.CatWorkspace, -total)
	}
}

// FreeScratch drops the cached scratch buffers (they are re-made on demand).
func (b *Backend) FreeScratch() {
	b.ws.bufs = [numSlots][]float32{}
	b.ws.idx = [numIdxSlots][]int32{}
}
