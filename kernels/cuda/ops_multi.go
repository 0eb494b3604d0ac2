package cuda

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"resnetlab/kernels"
)

// SoftmaxCrossEntropy writes the batch-mean loss into loss[0] and, unless
// dlogits is nil, (softmax - onehot) * scale / N into dlogits.
func (b *Backend) SoftmaxCrossEntropy(loss, dlogits, logits, labels *kernels.Tensor, scale float32) {
	defer b.enter("SoftmaxCrossEntropy", logits)()
	op := "SoftmaxCrossEntropy"
	b.owns(op, loss, dlogits, logits, labels)
	if len(logits.Shape) != 2 {
		panic(fmt.Sprintf("cuda: %s: logits %v must be [N,classes]", op, logits))
	}
	n, k := logits.Shape[0], logits.Shape[1]
	needShape(op, "labels", labels, n)
	if loss.Len() != 1 {
		panic(fmt.Sprintf("cuda: %s: loss %v must hold one element", op, loss))
	}
	if dlogits != nil {
		needShape(op, "dlogits", dlogits, n, k)
	}
	dl, dlt := optional(dlogits)
	if n == 0 {
		return
	}
	b.args.reset().ptr(loss.Dev).i32(int(loss.DType)).ptr(dl).i32(dlt).ptr(logits.Dev).i32(int(logits.DType)).
		ptr(labels.Dev).i32(int(labels.DType)).i32(n).i32(k).f32(scale)
	b.launch("softmax_ce", 1, 1, 1, 1024) // 32 warps: a batch of 100 is 3-4 rows a warp, not 12-13
}

// Multi-tensor table layouts, mirroring NFEntry, AdamEntry and AdamHP in
// src/ops.cu. Each tensor owns ceil(n/chunk) consecutive blocks.
type nfEntry struct {
	P          uint64
	N          int64
	BlockStart int32
	DT         int32
}

type adamEntry struct {
	P, G, M, V uint64
	N          int64
	BlockStart int32
	PDT, GDT   int32
	MDT, VDT   int32
	Vec        int32 // 1: vec4 holds for all four arrays
}

type adamHP struct{ LR, B1, B2, Eps, WD, BC1, BC2, GScale float32 }

const chunk = 4096 // elements per block, CHUNK in src/ops.cu

// table returns a device copy of the entries, cached by content: a training
// loop passes the same tensors every step, so the table is uploaded once.
// Tables are fresh allocations (not from the cache) written with a
// synchronous copy, so no queued kernel can be reading them, and so the
// upload is legal inside a relaxed-mode graph capture.
func table[E any](b *Backend, entries []E) uintptr {
	size := len(entries) * int(unsafe.Sizeof(entries[0]))
	bytes := unsafe.Slice((*byte)(unsafe.Pointer(&entries[0])), size)
	key := string(bytes)
	if p, ok := b.tables[key]; ok {
		return p
	}
	var p uintptr
	must("cuMemAlloc_v2(table)", drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size))
	// Staged through pinned memory: a pageable synchronous copy may return
	// before its DMA lands, a pinned one may not.
	if size > b.stageCap {
		b.noCapture("a first AdamStep/NonFinite over this many tensors")
		if b.stage != nil {
			must("cuMemFreeHost", drv.cuMemFreeHost, uintptr(b.stage))
		}
		b.stageCap = max(size, 64<<10)
		must("cuMemAllocHost_v2(table staging)", drv.cuMemAllocHost, uintptr(unsafe.Pointer(&b.stage)), uintptr(b.stageCap))
	}
	copy(unsafe.Slice((*byte)(b.stage), size), bytes)
	b.cnt.Syncs++ // a synchronous copy
	must("cuMemcpyHtoD_v2(table)", drv.cuMemcpyHtoD, p, uintptr(b.stage), uintptr(size))
	b.tables[key] = p
	b.alloc.account(kernels.CatWorkspace, int64(size))
	return p
}

// NonFinite reports whether any element of ts is inf or NaN: one launch
// sets a device flag, then a 4-byte copy brings it back.
func (b *Backend) NonFinite(ts []*kernels.Tensor) bool {
	defer b.enterList("NonFinite", ts)()
	b.noCapture("NonFinite")
	b.owns("NonFinite", ts...)
	if !b.queueNonFinite(ts) {
		return false
	}
	b.copyAsync("cuMemcpyDtoHAsync_v2(flag)", drv.cuMemcpyDtoHAsync, uintptr(b.host), b.flag, 4)
	b.syncStream()
	return *(*int32)(b.host) != 0
}

// queueNonFinite clears the device flag at b.flag and queues the check of
// ts into it; false when there is nothing to check.
func (b *Backend) queueNonFinite(ts []*kernels.Tensor) bool {
	var tab []nfEntry
	blocks := 0
	for _, t := range ts {
		if t == nil || t.Len() == 0 {
			continue
		}
		tab = append(tab, nfEntry{P: uint64(t.Dev), N: int64(t.Len()), BlockStart: int32(blocks), DT: int32(t.DType)})
		blocks += ceilDiv(t.Len(), chunk)
	}
	if len(tab) == 0 {
		return false
	}
	p := table(b, tab)
	b.memsetAsync(b.flag, 4)
	b.args.reset().ptr(p).i32(len(tab)).ptr(b.flag)
	b.launch("nonfinite", blocks, 1, 1, 256)
	return true
}

// LossAndNonFinite is kernels.LossReader: the loss scalar is copied next to
// the overflow flag on the device, and one 8-byte copy and one wait bring
// both back (Download then NonFinite would wait twice).
func (b *Backend) LossAndNonFinite(loss *kernels.Tensor, ts []*kernels.Tensor) (float32, bool) {
	defer b.enterList("LossAndNonFinite", ts)()
	b.noCapture("LossAndNonFinite")
	b.owns("LossAndNonFinite", loss)
	b.owns("LossAndNonFinite", ts...)
	if loss.Len() != 1 || loss.DType != kernels.F32 {
		panic(fmt.Sprintf("cuda: LossAndNonFinite: loss %v must be one fp32 element", loss))
	}
	if !b.queueNonFinite(ts) {
		b.memsetAsync(b.flag, 4)
	}
	b.copyAsync("cuMemcpyDtoDAsync_v2(loss)", drv.cuMemcpyDtoDAsync, b.flag+4, loss.Dev, 4)
	b.copyAsync("cuMemcpyDtoHAsync_v2(flag, loss)", drv.cuMemcpyDtoHAsync, uintptr(b.host), b.flag, 8)
	b.syncStream()
	return *(*float32)(unsafe.Add(b.host, 4)), *(*int32)(b.host) != 0
}

var _ kernels.LossReader = (*Backend)(nil)

// AdamStep updates every params[i] in one fused launch over a table of the
// tensors. Any tensor may be of any dtype (m and v are fp32 in practice). The
// hyper-parameters travel by value: a captured graph replays them as they
// were at capture time. A GradScale of 0 means 1.
func (b *Backend) AdamStep(params, grads, m, v []*kernels.Tensor, hp kernels.AdamParams) {
	defer b.enterList("AdamStep", params)()
	op := "AdamStep"
	checkAdam(op, params, grads, m, v, nil, hp)
	var tab []adamEntry
	blocks := 0
	for i, p := range params {
		b.owns(op, p, grads[i], m[i], v[i])
		sameLen(op, p, grads[i], m[i], v[i])
		if p.Len() == 0 {
			continue
		}
		tab = append(tab, adamEntry{P: uint64(p.Dev), G: uint64(grads[i].Dev), M: uint64(m[i].Dev), V: uint64(v[i].Dev),
			N: int64(p.Len()), BlockStart: int32(blocks), PDT: int32(p.DType), GDT: int32(grads[i].DType),
			MDT: int32(m[i].DType), VDT: int32(v[i].DType), Vec: vec4(p, grads[i], m[i], v[i])})
		blocks += ceilDiv(p.Len(), chunk)
	}
	if len(tab) == 0 {
		return
	}
	h := adamHyper(hp)
	raw(b.args.reset().ptr(table(b, tab)).i32(len(tab)), &h)
	b.launch("adam", blocks, 1, 1, 256)
}

// vec4 is an entry's Vec flag: 1 when the adam kernels may access every
// tensor 4 elements at a time, which needs its address to be a multiple of
// 4 elements (16 bytes for fp32, 8 for fp16/bf16; chunks start at
// multiples of 4096 elements, so the rest of the way stays aligned).
// Allocations (cuMemAlloc: 256 bytes) are, but a view into a flat buffer (a bucket, shard or
// Gemini chunk) may start anywhere; such a tensor takes the kernels' scalar
// path. Nil tensors (no copy) impose nothing.
func vec4(ts ...*kernels.Tensor) int32 {
	for _, t := range ts {
		if t != nil && t.Dev%uintptr(4*t.DType.Size()) != 0 {
			return 0
		}
	}
	return 1
}

func checkAdam(op string, params, grads, m, v, copies []*kernels.Tensor, hp kernels.AdamParams) {
	if len(grads) != len(params) || len(m) != len(params) || len(v) != len(params) || copies != nil && len(copies) != len(params) {
		panic(fmt.Sprintf("cuda: %s: %d params, %d grads, %d m, %d v, %d copies", op, len(params), len(grads), len(m), len(v), len(copies)))
	}
	if hp.Step < 1 {
		panic(fmt.Sprintf("cuda: %s: step %d, want >= 1 (1-based)", op, hp.Step))
	}
}

func adamHyper(hp kernels.AdamParams) adamHP {
	gs := hp.GradScale
	if gs == 0 {
		gs = 1
	}
	return adamHP{LR: hp.LR, B1: hp.Beta1, B2: hp.Beta2, Eps: hp.Eps, WD: hp.WeightDecay,
		BC1: float32(1 - math.Pow(float64(hp.Beta1), float64(hp.Step))),
		BC2: float32(1 - math.Pow(float64(hp.Beta2), float64(hp.Step))), GScale: gs}
}

// adamCopyEntry mirrors AdamCopyEntry in src/ops.cu.
type adamCopyEntry struct {
	P, G, M, V, C uint64
	N             int64
	BlockStart    int32
	PDT, GDT      int32
	MDT, VDT, CDT int32
	Vec           int32 // 1: vec4 holds for all five arrays (the copy where there is one)
	_             int32
}

var _ kernels.AdamCopier = (*Backend)(nil)

// AdamStepCopy is kernels.AdamCopier: AdamStep that also writes params[i]
// rounded to copies[i]'s dtype into copies[i] (nil: none), in the one launch
// of the adam_copy kernel. With no copies at all (fp32 training) it is
// AdamStep, whose smaller table entries and kernel do the same arithmetic
// (adamMath in src/ops.cu).
func (b *Backend) AdamStepCopy(params, grads, m, v, copies []*kernels.Tensor, hp kernels.AdamParams) {
	op := "AdamStepCopy"
	checkAdam(op, params, grads, m, v, copies, hp)
	if !slices.ContainsFunc(copies, func(c *kernels.Tensor) bool { return c != nil }) {
		b.AdamStep(params, grads, m, v, hp)
		return
	}
	defer b.enterList(op, params)()
	var tab []adamCopyEntry
	blocks := 0
	for i, p := range params {
		b.owns(op, p, grads[i], m[i], v[i], copies[i])
		sameLen(op, p, grads[i], m[i], v[i])
		e := adamCopyEntry{P: uint64(p.Dev), G: uint64(grads[i].Dev), M: uint64(m[i].Dev), V: uint64(v[i].Dev),
			N: int64(p.Len()), BlockStart: int32(blocks), PDT: int32(p.DType), GDT: int32(grads[i].DType),
			MDT: int32(m[i].DType), VDT: int32(v[i].DType), Vec: vec4(p, grads[i], m[i], v[i], copies[i])}
		if c := copies[i]; c != nil {
			sameLen(op, p, c)
			e.C, e.CDT = uint64(c.Dev), int32(c.DType)
		}
		if p.Len() == 0 {
			continue
		}
		tab = append(tab, e)
		blocks += ceilDiv(p.Len(), chunk)
	}
	if len(tab) == 0 {
		return
	}
	h := adamHyper(hp)
	raw(b.args.reset().ptr(table(b, tab)).i32(len(tab)), &h)
	b.launch("adam_copy", blocks, 1, 1, 256)
}
