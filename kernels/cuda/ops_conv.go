package cuda

import (
	"fmt"

	"resnetlab/kernels"
)

// convShape mirrors ConvShape in src/conv.cu.
type convShape struct{ N, C, H, W, K, R, S, P, Q, Stride, Pad int32 }

// The three implicit GEMMs of src/conv.cu.
const (
	modeFwd = iota
	modeBwdData
	modeBwdWeight
)

// convKernels[mode][prec] and denseKernels[mode][prec] name the kernels
// (denseKernels has no f32 entries); prec indexes precNames.
var (
	precNames    = [...]string{"f32", "tf32", "f16", "bf16"}
	convKernels  [3][4]string
	denseKernels [3][4]string
)

func init() {
	for m, mn := range [...]string{"fwd", "bwdd", "bwdw"} {
		for p, pn := range precNames {
			convKernels[m][p] = "conv_" + mn + "_" + pn
			if p > 0 {
				denseKernels[m][p] = "dense_" + mn + "_" + pn
			}
		}
	}
}

// gemm tile sizes of src/conv.cu.
const tileM, tileN, tileK = 64, 64, 32

// maxTaps is the largest R*S the gather kernels of src/conv.cu take.
const maxTaps = 64

func convShapeOf(op string, x, w *kernels.Tensor, p kernels.ConvParams) convShape {
	if len(x.Shape) != 4 || len(w.Shape) != 4 {
		panic(fmt.Sprintf("cuda: %s: input %v and weight %v must be 4-D", op, x, w))
	}
	if x.Shape[1] != w.Shape[1] {
		panic(fmt.Sprintf("cuda: %s: input %v has %d channels, weight %v wants %d", op, x, x.Shape[1], w, w.Shape[1]))
	}
	if p.Stride <= 0 || p.Pad < 0 {
		panic(fmt.Sprintf("cuda: %s: bad parameters %+v", op, p))
	}
	n, c, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	k, r, s := w.Shape[0], w.Shape[2], w.Shape[3]
	if r*s > maxTaps {
		// The gather kernels hold a window's valid taps in a 64-bit mask
		// with a bit per tap.
		panic(fmt.Sprintf("cuda: %s: %dx%d kernel of %v has more than %d taps", op, r, s, w, maxTaps))
	}
	P, Q := kernels.OutSize(h, r, p.Stride, p.Pad), kernels.OutSize(wd, s, p.Stride, p.Pad)
	if P <= 0 || Q <= 0 {
		panic(fmt.Sprintf("cuda: %s: %dx%d kernel does not fit %v with %+v", op, r, s, x, p))
	}
	for _, t := range []*kernels.Tensor{x, w} {
		if t.Len() >= 1<<31 {
			panic(fmt.Sprintf("cuda: %s: %v has 2^31 or more elements", op, t))
		}
	}
	return convShape{int32(n), int32(c), int32(h), int32(wd), int32(k), int32(r), int32(s), int32(P), int32(Q), int32(p.Stride), int32(p.Pad)}
}

func sameDType(op string, ts ...*kernels.Tensor) {
	for _, t := range ts[1:] {
		if t != nil && t.DType != ts[0].DType {
			panic(fmt.Sprintf("cuda: %s: %v and %v differ in dtype", op, ts[0], t))
		}
	}
}

// dims are the GEMM extents (rows, columns, reduction) of a mode.
func (s convShape) dims(mode int) (int, int, int) {
	n, c, h, w, k := int(s.N), int(s.C), int(s.H), int(s.W), int(s.K)
	rs, pq := int(s.R*s.S), int(s.P*s.Q)
	switch mode {
	case modeFwd:
		return n * pq, k, c * rs
	case modeBwdData:
		return n * h * w, c, k * rs
	}
	return k, c * rs, n * pq
}

// splitBlocksPerSM is how many GEMM blocks per multiprocessor split-K aims
// for.
const splitBlocksPerSM = 2

// splitK chooses how many ways to split the reduction so that a small GEMM
// still fills the GPU: about splitBlocksPerSM blocks per multiprocessor,
// each split at least two k-tiles long.
func (b *Backend) splitK(tiles, kTiles int) int {
	target := splitBlocksPerSM * b.sms
	if tiles >= target || kTiles < 4 {
		return 1
	}
	s := (target + tiles - 1) / tiles
	s = min(s, kTiles/2, 64)
	return max(s, 1)
}

// gemmPlan is how one GEMM runs: its kernel, whether that is a dense GEMM
// (denseGemm) and its extents, its row and column tiles, and its splits of
// tps k-tiles each.
type gemmPlan struct {
	kernel                       string
	dense                        bool
	M, N, K, tm, tn, splits, tps int
}

// plan picks the kernel and grid of a GEMM in precision prec (precNames)
// on operands a and c: the dense GEMM where convShape.dense allows, else
// the gather kernel's entry that convKernel names.
func (b *Backend) plan(mode, prec int, s convShape, a, c uintptr) gemmPlan {
	var g gemmPlan
	g.M, g.N, g.K, g.dense = s.dense(mode, prec, a, c)
	if g.dense {
		g.kernel = denseKernels[mode][prec]
	} else {
		g.M, g.N, g.K = s.dims(mode)
		g.kernel = convKernel(mode, prec, s, a, c)
	}
	g.tm, g.tn = ceilDiv(g.M, tileM), ceilDiv(g.N, tileN)
	kt := ceilDiv(g.K, tileK)
	g.tps = ceilDiv(kt, b.splitK(g.tm*g.tn, kt))
	g.splits = ceilDiv(kt, g.tps)
	return g
}

// precOf is the precision index (precNames) of a GEMM on dt: TF32 for fp32
// where b.TF32 is on and exact is not asked for.
func (b *Backend) precOf(dt kernels.DType, exact bool) int {
	switch dt {
	case kernels.F16:
		return 2
	case kernels.BF16:
		return 3
	}
	if b.TF32 && !exact {
		return 1
	}
	return 0
}

// gemm runs one implicit-GEMM pass: a and c are the mode's two operands
// (FWD: x, w; BWDD: dy, w; BWDW: dy, x), out its result. bias (FWD only,
// may be nil) is added per output channel. exact forbids TF32.
func (b *Backend) gemm(mode int, s convShape, a, c uintptr, out, bias *kernels.Tensor, exact bool) {
	b.gemmOn(b.stream, mode, s, a, c, out, bias, exact)
}

// gemmOn is gemm with its launches on stream st (the main or, between
// fork and join, the side stream). The split-K workspace is the GEMM's own
// block; release holds it back until the join when on either stream
// between fork and join.
func (b *Backend) gemmOn(st uintptr, mode int, s convShape, a, c uintptr, out, bias *kernels.Tensor, exact bool) {
	g := b.plan(mode, b.precOf(out.DType, exact), s, a, c)
	kernel, tm, tn, splits, tps := g.kernel, g.tm, g.tn, g.splits, g.tps
	// The leading arguments: the dense GEMM's (M, N, K) or the gather
	// kernel's ConvShape.
	lead := func() *argBuf {
		if g.dense {
			return b.args.reset().i32(g.M).i32(g.N).i32(g.K)
		}
		return raw(b.args.reset(), &s)
	}
	outLen := out.Len()
	biasPtr, bdt := optional(bias)
	if splits == 1 {
		lead().ptr(a).ptr(c).ptr(out.Dev).ptr(0).ptr(biasPtr).i32(bdt).i32(tps).i32(outLen)
		b.launchOn(st, kernel, tm, tn, 1, 128)
		return
	}
	wsBytes := int64(splits) * int64(outLen) * 4
	ws := b.workspace(wsBytes)
	lead().ptr(a).ptr(c).ptr(out.Dev).ptr(ws).ptr(0).i32(0).i32(tps).i32(outLen)
	b.launchOn(st, kernel, tm, tn, splits, 128)
	b.args.reset().ptr(out.Dev).i32(int(out.DType)).ptr(ws).i32(splits).i32(outLen).ptr(biasPtr).i32(bdt).
		i32(int(s.P * s.Q)).i32(int(s.K))
	b.launchOn(st, "splitk_reduce", b.gridFor(outLen), 1, 1, 256)
	b.release(ws, wsBytes)
}

// dense is the plain GEMM (M, N, K) that a convolution is when its output
// map is 1x1 and its window the whole input map with no padding (1x1
// convolutions on 1x1 maps, and the taps that reach a small map, see
// window), and whether the dense kernels of src/conv.cu (denseGemm) run
// it: tensor-core precisions, both operands 16-byte aligned and their
// contiguous extents whole 16-byte chunks. Row m, column n of the product
// is then the output element m*N + n in every mode. FWD and BWDW have the
// gather kernel's extents, tiles and reduction order, so which kernel runs
// (alignment picks) changes no bit; BWDD's reduction runs over k alone
// instead of (k, r, s), which agrees only where R = S = 1, but a windowed
// data gradient reaches it through the window's own aligned copy of the
// taps (convDgrad), so alignment does not pick there either.
func (s convShape) dense(mode, prec int, a, c uintptr) (m, n, k int, ok bool) {
	if prec == 0 || a%16 != 0 || c%16 != 0 || s.P != 1 || s.Q != 1 || s.R != s.H || s.S != s.W || s.Pad != 0 {
		return 0, 0, 0, false
	}
	chunk := 4 // fp32 and tf32 elements in 16 bytes
	if prec >= 2 {
		chunk = 8
	}
	crs := int(s.C * s.R * s.S)
	switch mode {
	case modeFwd: // x [N][CRS] times w [K][CRS]
		m, n, k = int(s.N), int(s.K), crs
		ok = k%chunk == 0
	case modeBwdData: // dy [N][K] times w [K][CRS]
		m, n, k = int(s.N), crs, int(s.K)
		ok = k%chunk == 0 && n%chunk == 0
	default: // dy [N][K] transposed times x [N][CRS]
		m, n, k = int(s.K), crs, int(s.N)
		ok = m%chunk == 0 && n%chunk == 0
	}
	return m, n, k, ok
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// convKernel picks the entry for a GEMM: fp16/bf16 use the _vec entry of
// src/conv.cu (16-byte loads) where vecOK allows.
func convKernel(mode, prec int, s convShape, a, c uintptr) string {
	name := convKernels[mode][prec]
	if prec >= 2 && vecOK(mode, s, a, c) {
		return name + "_vec"
	}
	return name
}

// vecOK reports whether the contiguous operand of a GEMM can be loaded 8
// 2-byte elements at a time: FWD's weights (rows of C*R*S) and BWDW's dy
// (runs of P*Q per image and channel), whole chunks of 8, 16-byte aligned.
// BWDD has no such operand.
func vecOK(mode int, s convShape, a, c uintptr) bool {
	switch mode {
	case modeFwd:
		return int(s.C*s.R*s.S)%8 == 0 && c%16 == 0
	case modeBwdWeight:
		return int(s.P*s.Q)%8 == 0 && a%16 == 0
	}
	return false
}

// Conv2dForward: y = conv(x, w), as an implicit GEMM on tensor cores (TF32
// for fp32 unless b.TF32 is off; fp16/bf16 operands with fp32 accumulation).
func (b *Backend) Conv2dForward(y, x, w *kernels.Tensor, p kernels.ConvParams) {
	defer b.enter("Conv2dForward", y, x, w)()
	op := "Conv2dForward"
	b.owns(op, y, x, w)
	s := convShapeOf(op, x, w, p)
	needShape(op, "y", y, int(s.N), int(s.K), int(s.P), int(s.Q))
	sameDType(op, y, x, w)
	if y.Len() > 0 {
		win, ok := s.window()
		if !ok {
			b.gemm(modeFwd, s, x.Dev, w.Dev, y, nil, false)
			return
		}
		wc := b.sliceTaps(s, win, w)
		b.gemm(modeFwd, win, x.Dev, wc.Dev, y, nil, false)
		b.freeScratch(wc)
	}
}

// window returns the convolution restricted to the taps that ever meet an
// input pixel, and whether that is fewer than all taps. On small maps (3x3
// pad 1 on a 1x1 map: the centre tap only; stride 2 on a 2x2 map: 2x2 taps)
// the other taps only ever multiply padding, so dropping them is exact: the
// same nonzero products, summed in a different order (fp32 accumulation, so
// results move by fp32 rounding only), and those taps' weight gradients are
// exactly zero. The kernel has one pad for both axes, so the window must
// start at the same tap on both.
func (s convShape) window() (convShape, bool) {
	r0, rn := tapWindow(s.H, s.P, s.R, s.Stride, s.Pad)
	s0, sn := tapWindow(s.W, s.Q, s.S, s.Stride, s.Pad)
	if r0 != s0 || rn <= 0 || sn <= 0 || (rn == s.R && sn == s.S) {
		return s, false
	}
	w := s
	w.R, w.S, w.Pad = rn, sn, s.Pad-r0
	return w, true
}

// tapWindow is the first tap and the number of taps along one axis that
// reach inside [0, size) for some output index in [0, out).
func tapWindow(size, out, k, stride, pad int32) (int32, int32) {
	lo := max(0, pad-(out-1)*stride)
	hi := min(k-1, size-1+pad)
	return lo, hi - lo + 1
}

// scratch is a workspace-backed tensor for one op's intermediate.
func (b *Backend) scratch(dt kernels.DType, shape ...int) *kernels.Tensor {
	t := &kernels.Tensor{Shape: shape, DType: dt, Cat: kernels.CatWorkspace, Owner: b}
	t.Dev = b.workspace(t.Bytes())
	return t
}

func (b *Backend) freeScratch(t *kernels.Tensor) { b.release(t.Dev, t.Bytes()) }

// sliceTaps copies the window's taps of w [K, C, R, S] into a scratch
// [K, C, win.R, win.S].
func (b *Backend) sliceTaps(s, win convShape, w *kernels.Tensor) *kernels.Tensor {
	wc := b.scratch(w.DType, int(s.K), int(s.C), int(win.R), int(win.S))
	b.moveTaps(wc, w, s, win, 0)
	return wc
}

// moveTaps launches conv_taps (src/ops.cu): toFull 0 slices src into the
// window, 1 scatters the window src into dst with zeros elsewhere.
func (b *Backend) moveTaps(dst, src *kernels.Tensor, s, win convShape, toFull int) {
	b.moveTapsOn(b.stream, dst, src, s, win, toFull)
}

// moveTapsOn is moveTaps on stream st.
func (b *Backend) moveTapsOn(st uintptr, dst, src *kernels.Tensor, s, win convShape, toFull int) {
	r0 := s.Pad - win.Pad
	if toFull == 1 { // the taps outside the window are zero
		b.cnt.Copies++
		must("cuMemsetD8Async(taps)", drv.cuMemsetD8Async, dst.Dev, 0, uintptr(dst.Bytes()), st)
	}
	b.args.reset().ptr(dst.Dev).ptr(src.Dev).i32(int(dst.DType)).i32(int(s.K) * int(s.C)).
		i32(int(s.R)).i32(int(s.S)).i32(int(r0)).i32(int(r0)).i32(int(win.R)).i32(int(win.S)).i32(toFull)
	n := int(s.K) * int(s.C) * int(win.R) * int(win.S)
	b.launchOn(st, "conv_taps", ceilDiv(n, 256), 1, 1, 256) // a thread per window element
}

// Conv2dBackward writes dx (skipped if nil) and dw.
func (b *Backend) Conv2dBackward(dx, dw, dy, x, w *kernels.Tensor, p kernels.ConvParams) {
	defer b.enter("Conv2dBackward", dy, x, w)()
	op := "Conv2dBackward"
	b.owns(op, dx, dw, dy, x, w)
	s := convShapeOf(op, x, w, p)
	needShape(op, "dy", dy, int(s.N), int(s.K), int(s.P), int(s.Q))
	needShape(op, "dw", dw, w.Shape...)
	sameDType(op, dy, x, w, dw, dx)
	if dx != nil {
		needShape(op, "dx", dx, x.Shape...)
	}
	needDX, needDW := dx != nil && dx.Len() > 0, dw.Len() > 0
	if needDX && needDW && b.concurrent() && dx.Dev != dy.Dev && dx.Dev != x.Dev {
		// Independent GEMMs (both read dy; dgrad w, wgrad x): the weight
		// gradient on the side stream, joined back before returning.
		side := b.fork()
		b.convWgrad(side, s, dw, dy, x)
		b.convDgrad(b.stream, s, dx, dy, w)
		b.join()
		return
	}
	if needDX {
		b.convDgrad(b.stream, s, dx, dy, w)
	}
	if needDW {
		b.convWgrad(b.stream, s, dw, dy, x)
	}
}

// convDgrad queues dx = the data gradient on stream st; on small maps only
// the window's taps of w take part (see window). A stride-1 data gradient
// is a forward convolution of dy (see flipped), which the forward GEMM
// runs about twice as fast as the BWDD GEMM's gather of dy; conv_flip
// writes its weights, the window's taps only, in one pass.
func (b *Backend) convDgrad(st uintptr, s convShape, dx, dy, w *kernels.Tensor) {
	win, ok := s.window()
	if fs, flip := win.flipped(); flip {
		wf := b.scratch(w.DType, int(win.C), int(win.K), int(win.R), int(win.S))
		r0 := s.Pad - win.Pad
		b.args.reset().ptr(wf.Dev).ptr(w.Dev).i32(int(w.DType)).i32(int(s.K)).i32(int(s.C)).i32(int(s.R)).i32(int(s.S)).
			i32(int(r0)).i32(int(r0)).i32(int(win.R)).i32(int(win.S))
		b.launchOn(st, "conv_flip", ceilDiv(wf.Len(), 256), 1, 1, 256) // a thread per element
		b.gemmOn(st, modeFwd, fs, dy.Dev, wf.Dev, dx, nil, false)
		b.freeScratch(wf)
		return
	}
	if !ok {
		b.gemmOn(st, modeBwdData, s, dy.Dev, w.Dev, dx, nil, false)
		return
	}
	wc := b.scratch(w.DType, int(s.K), int(s.C), int(win.R), int(win.S))
	b.moveTapsOn(st, wc, w, s, win, 0)
	b.gemmOn(st, modeBwdData, win, dy.Dev, wc.Dev, dx, nil, false)
	b.freeScratch(wc)
}

// flipped is the forward convolution that computes s's data gradient, and
// whether there is one: for stride 1 and square kernels with pad <= R-1,
// dx[n,c,h,w] = sum_{k,r,s} dy[n,k,h-(R-1-pad)+r,w-(S-1-pad)+s] wf[c,k,r,s]
// with wf the weights rotated by 180 degrees and transposed (conv_flip):
// a convolution of dy (K channels, P x Q) into C channels of H x W, pad
// R-1-pad. The products are the same; their order in the fp32 sum is not
// (taps run the other way), so results move by fp32 rounding only.
func (s convShape) flipped() (convShape, bool) {
	if s.Stride != 1 || s.R != s.S || s.Pad > s.R-1 {
		return s, false
	}
	return convShape{N: s.N, C: s.K, H: s.P, W: s.Q, K: s.C, R: s.R, S: s.S, P: s.H, Q: s.W, Stride: 1, Pad: s.R - 1 - s.Pad}, true
}

// convWgrad queues dw = the weight gradient on stream st; on small maps the
// window's taps are computed into a scratch and scattered into dw, whose
// other taps become zero.
func (b *Backend) convWgrad(st uintptr, s convShape, dw, dy, x *kernels.Tensor) {
	win, ok := s.window()
	if !ok {
		b.gemmOn(st, modeBwdWeight, s, dy.Dev, x.Dev, dw, nil, false)
		return
	}
	dwc := b.scratch(dw.DType, int(s.K), int(s.C), int(win.R), int(win.S))
	b.gemmOn(st, modeBwdWeight, win, dy.Dev, x.Dev, dwc, nil, false)
	b.moveTapsOn(st, dw, dwc, s, win, 1)
	b.freeScratch(dwc)
}

// linearShape views y[N,O] = x[N,I] w[O,I]^T as a 1x1 convolution on 1x1
// images, so the convolution GEMMs serve the fully connected layer too.
func linearShape(op string, x, w *kernels.Tensor) convShape {
	if len(x.Shape) != 2 || len(w.Shape) != 2 || x.Shape[1] != w.Shape[1] {
		panic(fmt.Sprintf("cuda: %s: input %v and weight %v must be [N,I] and [O,I]", op, x, w))
	}
	return convShape{N: int32(x.Shape[0]), C: int32(x.Shape[1]), H: 1, W: 1, K: int32(w.Shape[0]), R: 1, S: 1, P: 1, Q: 1, Stride: 1}
}

// LinearForward: y = x w^T + bias (bias may be nil), exact fp32 for fp32.
func (b *Backend) LinearForward(y, x, w, bias *kernels.Tensor) {
	defer b.enter("LinearForward", y, x, w)()
	op := "LinearForward"
	b.owns(op, y, x, w, bias)
	s := linearShape(op, x, w)
	needShape(op, "y", y, int(s.N), int(s.K))
	if bias != nil {
		needShape(op, "bias", bias, int(s.K))
	}
	sameDType(op, y, x, w)
	if y.Len() > 0 {
		b.gemm(modeFwd, s, x.Dev, w.Dev, y, bias, true)
	}
}

// LinearBackward writes dx and db unless nil, and dw.
func (b *Backend) LinearBackward(dx, dw, db, dy, x, w *kernels.Tensor) {
	defer b.enter("LinearBackward", dy, x, w)()
	op := "LinearBackward"
	b.owns(op, dx, dw, db, dy, x, w)
	s := linearShape(op, x, w)
	needShape(op, "dy", dy, int(s.N), int(s.K))
	needShape(op, "dw", dw, w.Shape...)
	sameDType(op, dy, x, w, dw, dx)
	if dx != nil {
		needShape(op, "dx", dx, x.Shape...)
	}
	if db != nil {
		needShape(op, "db", db, int(s.K))
	}
	needDX, needDW := dx != nil && dx.Len() > 0, dw.Len() > 0
	switch {
	case needDX && needDW && b.concurrent() && dx.Dev != dy.Dev && dx.Dev != x.Dev:
		side := b.fork() // as in Conv2dBackward
		b.gemmOn(side, modeBwdWeight, s, dy.Dev, x.Dev, dw, nil, true)
		b.gemm(modeBwdData, s, dy.Dev, w.Dev, dx, nil, true)
		b.join()
	default:
		if needDX {
			b.gemm(modeBwdData, s, dy.Dev, w.Dev, dx, nil, true)
		}
		if needDW {
			b.gemm(modeBwdWeight, s, dy.Dev, x.Dev, dw, nil, true)
		}
	}
	if db != nil {
		if db.Len() > 0 {
			b.args.reset().ptr(db.Dev).i32(int(db.DType)).ptr(dy.Dev).i32(int(dy.DType)).i32(int(s.N)).i32(int(s.K))
			b.launch("bias_grad", ceilDiv(int(s.K), 256), 1, 1, 256)
		}
	}
}
