package cpu

import (
	"fmt"
	"math"
)

// patches presents im2col of a chunk of images as a GEMM B operand without
// building it: element (row, col) is xp[base[col] + off[row]], with xp the
// zero-padded input, base[col] the corner of output pixel col's window and
// off[row] the offset of (channel, live tap) row inside a window. Packing
// a B panel is then a single gather, instead of an im2col pass plus a copy.
type patches struct {
	xp        []float32
	base, off []int32
}

// patchesT is the transposed operand im2col^T (rows are output pixels).
type patchesT patches

// makePatches builds the index tables for images n0..n0+cnt-1 and, when a
// live tap can read the padding, a zero-padded copy of them; otherwise the
// input itself is indexed (a 3x3 kernel on a 1x1 map keeps only its centre,
// which never leaves the image).
func (b *Backend) makePatches(x []float32, g convGeom, n0, cnt int) patches {
	lp := 0 // padding materialised in the layout
	if g.readsPadding() {
		lp = g.pad
	}
	hp, wp := g.H+2*lp, g.W+2*lp
	plane := hp * wp
	if int64(g.N)*int64(g.C)*int64(plane) > math.MaxInt32 {
		panic(fmt.Sprintf("cpu: conv input of %d images x %d channels x %dx%d exceeds int32 indexing", g.N, g.C, hp, wp))
	}
	var xp []float32
	if lp == 0 {
		xp = x[n0*g.C*plane : (n0+cnt)*g.C*plane]
	} else {
		xp = b.scratch(slotXP, cnt*g.C*plane)
		b.padImages(xp, x[n0*g.C*g.H*g.W:], g, cnt)
	}
	base := b.scratchIdx(slotBase, cnt*g.pq())
	for n := range cnt {
		for oh := range g.P {
			row := base[(n*g.P+oh)*g.Q : (n*g.P+oh+1)*g.Q]
			// Corner of the window in the layout; negative offsets only
			// occur without padding and are cancelled by every live tap.
			o := n*g.C*plane + (oh*g.stride-g.pad+lp)*wp - g.pad + lp
			for ow := range row {
				row[ow] = int32(o + ow*g.stride)
			}
		}
	}
	off := b.scratchIdx(slotOff, g.crs())
	for c := range g.C {
		for t, tap := range g.taps {
			off[c*len(g.taps)+t] = int32(c*plane + tap/g.S*wp + tap%g.S)
		}
	}
	return patches{xp: xp, base: base, off: off}
}

// readsPadding reports whether some live tap reads outside the image for
// some output position.
func (g convGeom) readsPadding() bool {
	for _, tap := range g.taps {
		r, s := tap/g.S, tap%g.S
		if r < g.pad || (g.P-1)*g.stride-g.pad+r >= g.H || s < g.pad || (g.Q-1)*g.stride-g.pad+s >= g.W {
			return true
		}
	}
	return false
}

// padImages copies cnt images into xp with a zero border of g.pad.
func (b *Backend) padImages(xp, x []float32, g convGeom, cnt int) {
	hp, wp, pad := g.H+2*g.pad, g.W+2*g.pad, g.pad
	b.parallel(cnt*g.C, 8, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			dst, src := xp[pl*hp*wp:(pl+1)*hp*wp], x[pl*g.H*g.W:(pl+1)*g.H*g.W]
			clear(dst[:pad*wp])
			clear(dst[(pad+g.H)*wp:])
			for h := range g.H {
				row := dst[(h+pad)*wp : (h+pad+1)*wp]
				clear(row[:pad])
				clear(row[pad+g.W:])
				copyShort(row[pad:pad+g.W], src[h*g.W:(h+1)*g.W])
			}
		}
	})
}

// packB gathers rows pc..pc+kc-1 (channel, tap) and columns j0..j0+nr-1
// (pixels) of im2col into a zero-padded panel.
func (s patches) packB(dst []float32, pc, j0, N, kc int) {
	cols := min(nr, N-j0)
	if cols < nr {
		clear(dst)
	}
	base, xp := s.base[j0:j0+cols], s.xp
	if cols == nr { // fixed-size arrays: no bounds checks on base and dst
		bs := (*[nr]int32)(base)
		for p, o := range s.off[pc : pc+kc] {
			d := (*[nr]float32)(dst[p*nr:])
			for j := range d {
				d[j] = xp[bs[j]+o]
			}
		}
		return
	}
	for p, o := range s.off[pc : pc+kc] {
		d := dst[p*nr : p*nr+cols]
		for j, bs := range base {
			d[j] = xp[bs+o]
		}
	}
}

// packB gathers rows pc..pc+kc-1 (pixels) and columns j0..j0+nr-1
// (channel, tap) of im2col^T into a zero-padded panel.
func (s patchesT) packB(dst []float32, pc, j0, N, kc int) {
	cols := min(nr, N-j0)
	if cols < nr {
		clear(dst)
	}
	off, xp := s.off[j0:j0+cols], s.xp
	if cols == nr {
		os := (*[nr]int32)(off)
		for p, bs := range s.base[pc : pc+kc] {
			d := (*[nr]float32)(dst[p*nr:])
			for j := range d {
				d[j] = xp[bs+os[j]]
			}
		}
		return
	}
	for p, bs := range s.base[pc : pc+kc] {
		d := dst[p*nr : p*nr+cols]
		for j, o := range off {
			d[j] = xp[bs+o]
		}
	}
}
