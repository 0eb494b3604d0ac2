package cpu

// A blocked, packed SGEMM in the style of BLIS/GotoBLAS. C (M x N) is cut
// into mr x nr register tiles; A and B are packed into zero-padded panels
// of kcBlock depth so the micro-kernel streams both contiguously. Work is
// split only over output tiles and the k-blocks are summed in one fixed
// order, so every element of C is computed by the same arithmetic no
// matter how many workers run or which worker runs which tile.

const (
	mr      = 6    // rows of a register tile
	nr      = 16   // columns of a register tile
	kcBlock = 256  // depth of one packed block (A panel + B panel fit L1/L2)
	ncBlock = 3072 // columns of B packed at once (L3-sized)
	mPanels = 12   // A panels per task (72 rows: an L2-sized A block)
	nPanels = 8    // B panels per task
)

// matrix is a strided view: element (i,j) is data[i*ld+j], or data[j*ld+i]
// when t (stored transposed).
type matrix struct {
	data []float32
	ld   int
	t    bool
}

// gemm computes C = A*B (accumulate false) or C += A*B, with A M x K,
// B K x N and C M x N row-major with leading dimension ldc.
func (b *Backend) gemm(M, N, K int, A, B matrix, C []float32, ldc int, accumulate bool) {
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
	mp := (M + mr - 1) / mr
	kcMax := min(K, kcBlock)
	packA := b.scratch(slotPackA, mp*mr*kcMax)
	npMax := (min(N, ncBlock) + nr - 1) / nr
	packB := b.scratch(slotPackB, npMax*nr*kcMax)
	tiles := b.scratch(slotTiles, b.workers*mr*nr)
	for pc := 0; pc < K; pc += kcBlock {
		kc := min(kcBlock, K-pc)
		b.parallel(mp, 1, func(lo, hi int) {
			for p := lo; p < hi; p++ {
				packPanelA(packA[p*mr*kc:(p+1)*mr*kc], A, p*mr, pc, M, kc)
			}
		})
		acc := accumulate || pc > 0
		for jc := 0; jc < N; jc += ncBlock {
			nc := min(ncBlock, N-jc)
			np := (nc + nr - 1) / nr
			b.parallel(np, 1, func(lo, hi int) {
				for p := lo; p < hi; p++ {
					packPanelB(packB[p*nr*kc:(p+1)*nr*kc], B, pc, jc+p*nr, N, kc)
				}
			})
			tm := (mp + mPanels - 1) / mPanels
			tn := (np + nPanels - 1) / nPanels
			b.tasks(tm*tn, func(w, t int) {
				ti, tj := t%tm, t/tm
				tile := tiles[w*mr*nr : (w+1)*mr*nr]
				for jr := tj * nPanels; jr < min(np, (tj+1)*nPanels); jr++ {
					bp := packB[jr*nr*kc : (jr+1)*nr*kc]
					j0 := jc + jr*nr
					for ir := ti * mPanels; ir < min(mp, (ti+1)*mPanels); ir++ {
						ap := packA[ir*mr*kc : (ir+1)*mr*kc]
						i0 := ir * mr
						if i0+mr <= M && j0+nr <= N {
							microKernel(kc, ap, bp, C[i0*ldc+j0:], ldc, acc)
							continue
						}
						microKernel(kc, ap, bp, tile, nr, false)
						storeEdge(C, ldc, tile, i0, j0, min(mr, M-i0), min(nr, N-j0), acc)
					}
				}
			})
		}
	}
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
