package parallel

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
			s = s[lo:hi]
			s = s[:len(a)]
			for i := range a {
				a[i] += s[i]
			}
		}
		if op == Avg {
			for i := range a {
				a[i] /= w
			}
		}
		copy(dst[lo:hi], a)
	}
}
