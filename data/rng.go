package data

// Stream domains keep the random streams of different purposes independent
// even when they share a seed.
const (
	domainPerm uint64 = 0x7065726d // "perm"
	domainAug  uint64 = 0x61756720 // "aug "
	domainSyn  uint64 = 0x73796e74 // "synt"
)

// mix64 is the splitmix64 finaliser: a bijective, well-mixing 64-bit hash.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hash combines values into one well-mixed 64-bit key; order matters.
func hash(vals ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, v := range vals {
		h = mix64(h ^ mix64(v+0x9e3779b97f4a7c15))
	}
	return h
}

// rng is a splitmix64 generator: tiny state, fast, good enough for shuffles
// and image noise, and trivially seeded from a hash.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// intn returns a value in [0,n) by multiply-shift (Lemire), bias < n/2^32.
func (r *rng) intn(n int) int {
	return int(((r.next() >> 32) * uint64(n)) >> 32)
}

// float returns a value in [0,1).
func (r *rng) float() float64 {
	return float64(r.next()>>11) / (1 << 53)
}
