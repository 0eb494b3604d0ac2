package cpu

import (
	"fmt"

	"resnetlab/kernels"
)

// colBudget bounds the per-chunk buffers (float32s): the padded input, the
// GEMM output and, for strided backward, the column gradients. The batch is processed in
// chunks of images whose size depends only on the shapes, never on the
// worker count, so results stay deterministic.
var colBudget = 1 << 22 // a var so tests can force chunking

// convGeom holds the sizes of one convolution.
type convGeom struct {
	N, C, H, W, K, R, S, P, Q, stride, pad int
	// taps lists the kernel taps r*S+s that touch the input for at least
	// one output position. Taps that only ever see padding (a 3x3 kernel
	// on a 1x1 map keeps only its centre) are dropped from the GEMM: their
	// im2col rows would be all zeros.
	taps []int
}

// crs is the GEMM reduction depth: channels times live taps.
func (g convGeom) crs() int { return g.C * len(g.taps) }
func (g convGeom) pq() int  { return g.P * g.Q }

// allTaps reports whether no tap was dropped.
func (g convGeom) allTaps() bool { return len(g.taps) == g.R*g.S }

func (g *convGeom) findTaps() {
	g.taps = g.taps[:0]
	for r := range g.R {
		if lo, hi := validRange(g.P, g.H, g.stride, g.pad, r); lo == hi {
			continue
		}
		for s := range g.S {
			if lo, hi := validRange(g.Q, g.W, g.stride, g.pad, s); lo < hi {
				g.taps = append(g.taps, r*g.S+s)
			}
		}
	}
}

// weights returns w as a [K, crs] matrix, compacted to the live taps.
func (b *Backend) weights(w []float32, g convGeom) []float32 {
	if g.allTaps() {
		return w
	}
	rs, nt := g.R*g.S, len(g.taps)
	wc := b.scratch(slotW, g.K*g.crs())
	b.parallel(g.K, 8, func(lo, hi int) {
		for kc := lo * g.C; kc < hi*g.C; kc++ {
			src, dst := w[kc*rs:(kc+1)*rs], wc[kc*nt:(kc+1)*nt]
			for t, tap := range g.taps {
				dst[t] = src[tap]
			}
		}
	})
	return wc
}

// scatterWeights writes a [K, crs] gradient over the live taps into dw,
// zero at the dropped taps.
func (b *Backend) scatterWeights(dw, dwc []float32, g convGeom) {
	rs, nt := g.R*g.S, len(g.taps)
	b.parallel(g.K, 8, func(lo, hi int) {
		for kc := lo * g.C; kc < hi*g.C; kc++ {
			dst, src := dw[kc*rs:(kc+1)*rs], dwc[kc*nt:(kc+1)*nt]
			clear(dst)
			for t, tap := range g.taps {
				dst[tap] = src[t]
			}
		}
	})
}

// chunk is the number of images whose im2col columns are built at once.
func (g convGeom) chunk() int {
	per := max(1, g.crs()*g.pq())
	return max(1, min(g.N, colBudget/per))
}

func newConvGeom(op string, y, x, w *kernels.Tensor, p kernels.ConvParams) convGeom {
	var g convGeom
	g.N, g.C, g.H, g.W = dims4(op, "x", x)
	var c int
	g.K, c, g.R, g.S = dims4(op, "w", w)
	if c != g.C {
		panic(fmt.Sprintf("cpu: %s: weight %v has %d input channels, x %v has %d", op, w.Shape, c, x.Shape, g.C))
	}
	if p.Stride < 1 || p.Pad < 0 {
		panic(fmt.Sprintf("cpu: %s: bad params stride %d pad %d (want stride >= 1, pad >= 0)", op, p.Stride, p.Pad))
	}
	g.stride, g.pad = p.Stride, p.Pad
	g.P = kernels.OutSize(g.H, g.R, g.stride, g.pad)
	g.Q = kernels.OutSize(g.W, g.S, g.stride, g.pad)
	if g.P < 1 || g.Q < 1 {
		panic(fmt.Sprintf("cpu: %s: kernel %dx%d larger than padded input %v", op, g.R, g.S, x.Shape))
	}
	wantShape(op, "y/dy", y, g.N, g.K, g.P, g.Q)
	g.findTaps()
	return g
}

// Conv2dForward computes y = conv(x, w) as an implicit GEMM:
// y[K, pixels] = w[K, C*taps] * im2col(x), where im2col is never built but
// gathered straight into the GEMM's packed panels (see patches).
func (b *Backend) Conv2dForward(y, x, w *kernels.Tensor, p kernels.ConvParams) {
	b.check(y, "Conv2dForward y")
	b.check(x, "Conv2dForward x")
	b.check(w, "Conv2dForward w")
	g := newConvGeom("Conv2dForward", y, x, w, p)
	defer b.releaseScratch()
	b.convForward(y.Host, x.Host, b.weights(w.Host, g), g)
	b.round(y)
}

// convForward writes y = conv(x, w) for geometry g, chunk by chunk; wc is
// the [K, C*taps] weight matrix over the live taps.
func (b *Backend) convForward(y, x, wc []float32, g convGeom) {
	crs, pq, nb := g.crs(), g.pq(), g.chunk()
	W := matrix{data: wc, ld: crs}
	for n0 := 0; n0 < g.N; n0 += nb {
		cnt := min(nb, g.N-n0)
		src := b.makePatches(x, g, n0, cnt)
		if cnt == 1 {
			b.gemm(g.K, pq, crs, W, src, y[n0*g.K*pq:], pq, false)
			continue
		}
		out := b.scratch(slotT, g.K*cnt*pq)
		b.gemm(g.K, cnt*pq, crs, W, src, out, cnt*pq, false)
		b.unfoldBatch(y[n0*g.K*pq:], out, g.K, cnt, pq)
	}
}

// Conv2dBackward computes dw = sum over images of dy * im2col(x)^T (chunk
// partials added in order) and, unless dx is nil, dx: for stride 1 as the
// forward convolution of dy with the flipped, transposed kernel; otherwise
// as col2im(w^T * dy).
func (b *Backend) Conv2dBackward(dx, dw, dy, x, w *kernels.Tensor, p kernels.ConvParams) {
	b.check(dw, "Conv2dBackward dw")
	b.check(dy, "Conv2dBackward dy")
	b.check(x, "Conv2dBackward x")
	b.check(w, "Conv2dBackward w")
	g := newConvGeom("Conv2dBackward", dy, x, w, p)
	wantShape("Conv2dBackward", "dw", dw, w.Shape...)
	if dx != nil {
		b.check(dx, "Conv2dBackward dx")
		wantShape("Conv2dBackward", "dx", dx, x.Shape...)
	}
	defer b.releaseScratch()
	crs, pq, nb := g.crs(), g.pq(), g.chunk()
	dwc := dw.Host
	if !g.allTaps() {
		dwc = b.scratch(slotDW, g.K*crs)
	}
	viaConv := dx != nil && g.stride == 1 && g.R == g.S && g.pad <= g.R-1
	var wc []float32
	if dx != nil && !viaConv {
		wc = b.weights(w.Host, g)
	}
	for n0 := 0; n0 < g.N; n0 += nb {
		cnt := min(nb, g.N-n0)
		cols := cnt * pq
		src := b.makePatches(x.Host, g, n0, cnt)
		dyT := b.scratch(slotT, g.K*cols)
		b.foldBatch(dyT, dy.Host[n0*g.K*pq:], g.K, cnt, pq)
		dyM := matrix{data: dyT, ld: cols}
		// dw[K,CRS] (+)= dyT[K,cols] * im2col^T; chunks add up in order.
		b.gemm(g.K, crs, cols, dyM, patchesT(src), dwc, crs, n0 > 0)
		if dx == nil || viaConv {
			continue
		}
		dcol := b.scratch(slotCol, crs*cols)
		b.gemm(crs, cols, g.K, matrix{data: wc, ld: crs, t: true}, dyM, dcol, cols, false)
		b.col2im(dx.Host, dcol, g, n0, cnt)
	}
	if !g.allTaps() {
		b.scatterWeights(dw.Host, dwc, g)
	}
	b.round(dw)
	if dx == nil {
		return
	}
	if viaConv {
		gt := g.transposed()
		b.convForward(dx.Host, dy.Host, b.flippedWeights(w.Host, g, gt), gt)
	}
	b.round(dx)
}

// transposed is the geometry of the stride-1 convolution that maps dy to
// dx: input [N,K,P,Q], kernel [C,K,R,S] flipped, padding R-1-pad.
func (g convGeom) transposed() convGeom {
	t := convGeom{N: g.N, C: g.K, H: g.P, W: g.Q, K: g.C, R: g.R, S: g.S,
		P: g.H, Q: g.W, stride: 1, pad: g.R - 1 - g.pad}
	t.findTaps()
	return t
}

// flippedWeights returns the weight matrix of the transposed convolution
// gt over its live taps: wt[c, k, t] = w[k, c, R*S-1-tap(t)], the kernel
// flipped in both axes with input and output channels swapped.
func (b *Backend) flippedWeights(w []float32, g, gt convGeom) []float32 {
	rs, nt := g.R*g.S, len(gt.taps)
	wt := b.scratch(slotWT, g.C*g.K*nt)
	b.parallel(g.C, 8, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			for k := range g.K {
				src, dst := w[(k*g.C+c)*rs:(k*g.C+c+1)*rs], wt[(c*g.K+k)*nt:(c*g.K+k+1)*nt]
				for t, tap := range gt.taps {
					dst[t] = src[rs-1-tap]
				}
			}
		}
	})
	return wt
}

// unfoldBatch scatters out[K, cnt*pq] into y[cnt, K, pq].
func (b *Backend) unfoldBatch(y, out []float32, K, cnt, pq int) {
	b.parallel(K, 8, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			for n := range cnt {
				copyShort(y[(n*K+k)*pq:(n*K+k+1)*pq], out[(k*cnt+n)*pq:(k*cnt+n+1)*pq])
			}
		}
	})
}

// foldBatch gathers dy[cnt, K, pq] into out[K, cnt*pq].
func (b *Backend) foldBatch(out, dy []float32, K, cnt, pq int) {
	b.parallel(K, 8, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			for n := range cnt {
				copyShort(out[(k*cnt+n)*pq:(k*cnt+n+1)*pq], dy[(n*K+k)*pq:(n*K+k+1)*pq])
			}
		}
	})
}

// copyShort copies like copy, without a memmove call for the tiny rows of
// the late ResNet stages (1, 4 or 16 values).
func copyShort(dst, src []float32) {
	if len(dst) > 16 {
		copy(dst, src)
		return
	}
	src = src[:len(dst)]
	//lint:ignore S1001 the loop is the point: no memmove call for 1-16 values
	for i, v := range src {
		dst[i] = v
	}
}

// validRange returns the output positions o in [lo,hi) whose input index
// o*stride - pad + off lies inside [0,size).
func validRange(out, size, stride, pad, off int) (lo, hi int) {
	// o*stride >= pad-off  and  o*stride <= size-1+pad-off
	lo = 0
	if d := pad - off; d > 0 {
		lo = (d + stride - 1) / stride
	}
	hi = 0
	if d := size - 1 + pad - off; d >= 0 {
		hi = d/stride + 1
	}
	hi = min(hi, out)
	lo = min(lo, hi)
	return lo, hi
}

// col2im writes dx for images n0..n0+cnt-1 from dcol[CRS, cnt*PQ]. Each
// (image, channel) plane is summed by one goroutine in a fixed order.
func (b *Backend) col2im(dx, dcol []float32, g convGeom, n0, cnt int) {
	pq, hw := g.pq(), g.H*g.W
	cols := cnt * pq
	b.parallel(cnt*g.C, 1, func(lo, hi int) {
		for plane := lo; plane < hi; plane++ {
			n, c := plane/g.C, plane%g.C
			dst := dx[((n0+n)*g.C+c)*hw : ((n0+n)*g.C+c+1)*hw]
			clear(dst)
			for t, tap := range g.taps {
				r, s := tap/g.S, tap%g.S
				plo, phi := validRange(g.P, g.H, g.stride, g.pad, r)
				qlo, qhi := validRange(g.Q, g.W, g.stride, g.pad, s)
				src := dcol[(c*len(g.taps)+t)*cols+n*pq:]
				for oh := plo; oh < phi; oh++ {
					drow := dst[(oh*g.stride-g.pad+r)*g.W:]
					srow := src[oh*g.Q : (oh+1)*g.Q]
					iw := qlo*g.stride - g.pad + s
					for ow := qlo; ow < qhi; ow++ {
						drow[iw] += srow[ow]
						iw += g.stride
					}
				}
			}
		}
	})
}
