package comm

// tile is the number of elements reduced at a time: the accumulator stays in
// L1 cache and dst is written once, after all sources were read, so dst may
// be one of the sources (in-place all-reduce).
const tile = 2048

// reduceInto writes into dst the rank-order reduction of srcs, each of
// len(dst) elements: ((s0 + s1) + s2) + ... and, for Avg, that sum / W.
func reduceInto(dst []float32, srcs [][]float32, op Op) {
	var acc [tile]float32
	w := float32(len(srcs))
	for lo := 0; lo < len(dst); lo += tile {
		hi := min(lo+tile, len(dst))
		a := acc[:hi-lo]
		copy(a, srcs[0][lo:hi])
		for _, s := range srcs[1:] {
			addTo(a, s[lo:hi])
		}
		if op == Avg {
			for i := range a {
				a[i] /= w
			}
		}
		copy(dst[lo:hi], a)
	}
}

// addTo does a[i] += s[i], unrolled by 4 (the compiler does not vectorise).
func addTo(a, s []float32) {
	s = s[:len(a)]
	i := 0
	for ; i+4 <= len(a); i += 4 {
		aa, ss := a[i:i+4:i+4], s[i:i+4:i+4]
		aa[0] += ss[0]
		aa[1] += ss[1]
		aa[2] += ss[2]
		aa[3] += ss[3]
	}
	for ; i < len(a); i++ {
		a[i] += s[i]
	}
}
