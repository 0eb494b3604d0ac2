package cpu

// A blocked, packed SGEMM in the style of BLIS/GotoBLAS. C (M x N) is cut
// into mr x nr register tiles; A and B are packed into zero-padded panels
// of kcBlock depth so the micro-kernel streams both contiguously. Work is
// split only over output tiles and the k-blocks are summed in one fixed
// order, so every element of C is computed by the same arithmetic no
// matter how many workers run or which worker runs which tile.

const (
	mr      = 6   // rows of a register tile
	nr      = 16  // columns of a register tile
	kcBlock = 256 // depth of one packed block: an A panel (6 KiB) stays in L1
	nPanels = 8   // B panels per task: a 128 KiB strip that stays in L2
)

// matrix is a strided view: element (i,j) is data[i*ld+j], or data[j*ld+i]
// when t (stored transposed).
type matrix struct {
	data []float32
	ld   int
	t    bool
}

// operandA packs an mr-row panel of A: rows i0.., columns pc..pc+kc-1.
type operandA interface {
	packA(dst []float32, i0, pc, M, kc int)
}

// operandB packs an nr-column panel of B: rows pc..pc+kc-1, columns j0...
type operandB interface {
	packB(dst []float32, pc, j0, N, kc int)
}

func (m matrix) packA(dst []float32, i0, pc, M, kc int) { packPanelA(dst, m, i0, pc, M, kc) }
func (m matrix) packB(dst []float32, pc, j0, N, kc int) { packPanelB(dst, m, pc, j0, N, kc) }

// gemm computes C = A*B (accumulate false) or C += A*B, with A M x K,
// B K x N and C M x N row-major with leading dimension ldc.
func (b *Backend) gemm(M, N, K int, A operandA, B operandB, C []float32, ldc int, accumulate bool) {
	if M == 0 || N == 0 {
		return
	}
	if K == 0 {
		if !accumulate {
			for i := range M {
				clear(C[i*ldc : i*ldc+N])
			}
		}
		return
	}
	mp, np := (M+mr-1)/mr, (N+nr-1)/nr
	packA := b.packAllA(A, M, K, mp)
	strips := (np + nPanels - 1) / nPanels
	if strips < 2*b.workers && b.workers > 1 {
		// Few columns (the late ResNet stages): pack all of B once and
		// split the work by rows instead.
		b.gemmRows(M, N, K, mp, np, packA, b.packAllB(B, N, K, np), C, ldc, accumulate)
		return
	}
	// Tasks are column strips of nPanels B panels. A task packs its own B
	// strip per k-block (into its worker's buffer) and runs all of M, so
	// one barrier ends the GEMM and an idle worker just takes more tasks.
	stripLen := nPanels * nr * min(K, kcBlock)
	packB := b.scratch(slotPackB, b.workers*stripLen)
	tiles := b.scratch(slotTiles, b.workers*mr*nr)
	b.tasks(strips, func(w, s int) {
		j0 := s * nPanels * nr
		panels := min(nPanels, np-s*nPanels)
		bp := packB[w*stripLen : (w+1)*stripLen]
		for pc := 0; pc < K; pc += kcBlock {
			kc := min(kcBlock, K-pc)
			for jr := range panels {
				B.packB(bp[jr*nr*kc:(jr+1)*nr*kc], pc, j0+jr*nr, N, kc)
			}
			b.tilesBlock(M, N, kc, mp*mr*pc, packA, bp, 0, mp, j0, panels, C, ldc, accumulate || pc > 0, tiles[w*mr*nr:(w+1)*mr*nr])
		}
	})
}

// gemmRows runs the GEMM as tasks of row groups over a fully packed B.
func (b *Backend) gemmRows(M, N, K, mp, np int, packA, packB, C []float32, ldc int, accumulate bool) {
	groups := min(mp, 4*b.workers)
	tiles := b.scratch(slotTiles, b.workers*mr*nr)
	b.tasks(groups, func(w, t int) {
		ir0, ir1 := t*mp/groups, (t+1)*mp/groups
		for pc := 0; pc < K; pc += kcBlock {
			kc := min(kcBlock, K-pc)
			b.tilesBlock(M, N, kc, mp*mr*pc, packA, packB[np*nr*pc:], ir0, ir1, 0, np, C, ldc, accumulate || pc > 0, tiles[w*mr*nr:(w+1)*mr*nr])
		}
	})
}

// tilesBlock multiplies A panels ir0..ir1-1 of the k-block at offset aOff
// by the B panels of bp (the first at column j0) and stores into C. An A
// panel stays in L1 while the B panels stream from L2.
func (b *Backend) tilesBlock(M, N, kc, aOff int, packA, bp []float32, ir0, ir1, j0, panels int, C []float32, ldc int, acc bool, tile []float32) {
	blockA := packA[aOff:]
	for ir := ir0; ir < ir1; ir++ {
		ap, i0 := blockA[ir*mr*kc:(ir+1)*mr*kc], ir*mr
		for jr := range panels {
			bpj, jj := bp[jr*nr*kc:(jr+1)*nr*kc], j0+jr*nr
			if i0+mr <= M && jj+nr <= N {
				microKernel(kc, ap, bpj, C[i0*ldc+jj:], ldc, acc)
				continue
			}
			microKernel(kc, ap, bpj, tile, nr, false)
			storeEdge(C, ldc, tile, i0, jj, min(mr, M-i0), min(nr, N-jj), acc)
		}
	}
}

// packAllB packs every k-block of B: block pc starts at np*nr*pc and
// holds np panels of kc x nr.
func (b *Backend) packAllB(B operandB, N, K, np int) []float32 {
	packB := b.scratch(slotPackB, np*nr*K)
	kb := (K + kcBlock - 1) / kcBlock
	b.tasks(kb*np, func(_, t int) {
		pc, p := t/np*kcBlock, t%np
		kc := min(kcBlock, K-pc)
		B.packB(packB[np*nr*pc+p*nr*kc:np*nr*pc+(p+1)*nr*kc], pc, p*nr, N, kc)
	})
	return packB
}

// packAllA packs every k-block of A up front: block pc starts at
// mp*mr*pc and holds mp panels of mr x kc.
func (b *Backend) packAllA(A operandA, M, K, mp int) []float32 {
	packA := b.scratch(slotPackA, mp*mr*K)
	kb := (K + kcBlock - 1) / kcBlock
	const group = 8 // panels per task
	pg := (mp + group - 1) / group
	b.tasks(kb*pg, func(_, t int) {
		pc := t / pg * kcBlock
		kc := min(kcBlock, K-pc)
		blk := packA[mp*mr*pc:]
		for p := t % pg * group; p < min(mp, (t%pg+1)*group); p++ {
			A.packA(blk[p*mr*kc:(p+1)*mr*kc], p*mr, pc, M, kc)
		}
	})
	return packA
}

// storeEdge writes the valid rows x cols part of a full tile into C with
// the same single rounding (C = t or C = C + t) as the micro-kernel.
func storeEdge(C []float32, ldc int, tile []float32, i0, j0, rows, cols int, acc bool) {
	for i := range rows {
		c := C[(i0+i)*ldc+j0 : (i0+i)*ldc+j0+cols]
		t := tile[i*nr : i*nr+cols]
		if acc {
			for j := range c {
				c[j] += t[j]
			}
		} else {
			copy(c, t)
		}
	}
}

// packPanelA packs rows i0..i0+mr-1, columns pc..pc+kc-1 of A as kc groups
// of mr values (zero rows past M).
func packPanelA(dst []float32, A matrix, i0, pc, M, kc int) {
	rows := min(mr, M-i0)
	if rows < mr {
		clear(dst)
	}
	if A.t {
		for p := range kc {
			src := A.data[(pc+p)*A.ld+i0:]
			d := dst[p*mr : p*mr+rows]
			copy(d, src[:rows])
		}
		return
	}
	if rows == mr {
		// Six source rows at once: contiguous reads, sequential writes.
		d := A.data[i0*A.ld+pc:]
		ld := A.ld
		r0, r1, r2 := d[:kc], d[ld:ld+kc], d[2*ld:2*ld+kc]
		r3, r4, r5 := d[3*ld:3*ld+kc], d[4*ld:4*ld+kc], d[5*ld:5*ld+kc]
		for p := range kc {
			o := (*[mr]float32)(dst[p*mr:])
			o[0], o[1], o[2], o[3], o[4], o[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
		}
		return
	}
	for i := range rows {
		src := A.data[(i0+i)*A.ld+pc : (i0+i)*A.ld+pc+kc]
		for p, v := range src {
			dst[p*mr+i] = v
		}
	}
}

// packPanelB packs rows pc..pc+kc-1, columns j0..j0+nr-1 of B as kc groups
// of nr values (zero columns past N).
func packPanelB(dst []float32, B matrix, pc, j0, N, kc int) {
	cols := min(nr, N-j0)
	if cols < nr {
		clear(dst)
	}
	if !B.t {
		for p := range kc {
			src := B.data[(pc+p)*B.ld+j0:]
			if cols == nr { // an inline 64-byte move, not a memmove call
				*(*[nr]float32)(dst[p*nr:]) = *(*[nr]float32)(src)
				continue
			}
			copy(dst[p*nr:p*nr+cols], src[:cols])
		}
		return
	}
	for j := range cols {
		src := B.data[(j0+j)*B.ld+pc : (j0+j)*B.ld+pc+kc]
		for p, v := range src {
			dst[p*nr+j] = v
		}
	}
}

// microKernel computes the mr x nr tile t = sum_p a[p]*b[p]^T over kc
// packed steps and stores C = t (acc false) or C = C + t. It is the AVX2
// assembly kernel where the CPU has it, else kernelGo.
var microKernel = kernelGo

// kernelGo is the portable micro-kernel. It walks the tile in 3x4
// sub-tiles so that the 12 accumulators, 3 A values and one B value fit in
// the 15 float registers the Go compiler allocates on amd64.
func kernelGo(kc int, a, b, c []float32, ldc int, acc bool) {
	a = a[:kc*mr]
	b = b[:kc*nr]
	for i0 := 0; i0 < mr; i0 += 3 {
		for j0 := 0; j0 < nr; j0 += 4 {
			var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23 float32
			for p := range kc {
				ap := a[p*mr+i0 : p*mr+i0+3 : p*mr+i0+3]
				bp := b[p*nr+j0 : p*nr+j0+4 : p*nr+j0+4]
				a0, a1, a2 := ap[0], ap[1], ap[2]
				b0 := bp[0]
				c00 += a0 * b0
				c10 += a1 * b0
				c20 += a2 * b0
				b1 := bp[1]
				c01 += a0 * b1
				c11 += a1 * b1
				c21 += a2 * b1
				b2 := bp[2]
				c02 += a0 * b2
				c12 += a1 * b2
				c22 += a2 * b2
				b3 := bp[3]
				c03 += a0 * b3
				c13 += a1 * b3
				c23 += a2 * b3
			}
			storeTile(c[i0*ldc+j0:], ldc, acc,
				[12]float32{c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23})
		}
	}
}

// storeTile writes a 3x4 block of accumulators into C.
func storeTile(c []float32, ldc int, acc bool, t [12]float32) {
	for i := range 3 {
		row := c[i*ldc : i*ldc+4 : i*ldc+4]
		if acc {
			row[0] += t[i*4]
			row[1] += t[i*4+1]
			row[2] += t[i*4+2]
			row[3] += t[i*4+3]
		} else {
			row[0], row[1], row[2], row[3] = t[i*4], t[i*4+1], t[i*4+2], t[i*4+3]
		}
	}
}

func kernelName() string {
	if usingAsm {
		return "AVX2/FMA"
	}
	return "pure-Go"
}
