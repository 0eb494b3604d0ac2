package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// format describes a 2-byte float format for the reference functions,
// which use only float64 arithmetic and the IEEE 754 definitions.
type format struct {
	name           string
	expBits, mBits int
	narrow         func(float32) uint16
	widen          func(uint16) float32
	round          func(float32) float32
	maxFinite      uint16
}

var (
	fp16 = format{"fp16", 5, 10, F32ToF16Bits, F16BitsToF32, RoundF16, 0x7bff}
	bf16 = format{"bf16", 8, 7, F32ToBF16Bits, BF16BitsToF32, RoundBF16, 0x7f7f}
)

func (f format) bias() int { return 1<<(f.expBits-1) - 1 }

// refDecode is the value of bit pattern h by the definition of the format.
func (f format) refDecode(h uint16) float64 {
	e := int(h>>f.mBits) & (1<<f.expBits - 1)
	m := float64(int(h) & (1<<f.mBits - 1))
	var v float64
	switch e {
	case 1<<f.expBits - 1:
		if m != 0 {
			return math.NaN()
		}
		v = math.Inf(1)
	case 0:
		v = math.Ldexp(m, 1-f.bias()-f.mBits)
	default:
		v = math.Ldexp(m+math.Ldexp(1, f.mBits), e-f.bias()-f.mBits)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// refRound rounds a finite x to the format: the quantum of x's binade
// (clamped at the subnormal one) divides x exactly, RoundToEven does ties,
// and anything reaching 2^(emax+1) overflows to Inf.
func (f format) refRound(x float64) float64 {
	_, e := math.Frexp(math.Abs(x)) // |x| in [2^(e-1), 2^e)
	e = max(e-1, 1-f.bias())
	q := math.Ldexp(1, e-f.mBits)
	r := math.RoundToEven(x/q) * q
	if math.Abs(r) >= math.Ldexp(1, f.bias()+1) {
		return math.Copysign(math.Inf(1), x)
	}
	return r
}

// same compares floats including the sign of zero; NaN equals NaN.
func same(a, b float64) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return a == b && math.Signbit(a) == math.Signbit(b)
}

// checkNarrow checks narrow(x) against the reference rounding for a finite
// or infinite x; NaN inputs are checked by the NaN tests.
func (f format) checkNarrow(t *testing.T, x float32) {
	t.Helper()
	h := f.narrow(x)
	want := f.refRound(float64(x))
	if math.IsInf(float64(x), 0) {
		want = float64(x)
	}
	if got := f.refDecode(h); !same(got, want) {
		t.Fatalf("%s: narrow(%g = %#08x) = %#04x (%g), want %g", f.name, x, math.Float32bits(x), h, got, want)
	}
	if got := f.round(x); !same(float64(got), want) {
		t.Fatalf("%s: round(%g = %#08x) = %g, want %g", f.name, x, math.Float32bits(x), got, want)
	}
}

// TestHalfAllPatterns widens every bit pattern of both formats, compares with
// the definition, and narrows back: finite values and Inf must come back
// bit for bit, NaNs as quiet NaNs with their sign and payload.
func TestHalfAllPatterns(t *testing.T) {
	for _, f := range []format{fp16, bf16} {
		for i := 0; i < 1<<16; i++ {
			h := uint16(i)
			w := f.widen(h)
			want := f.refDecode(h)
			if !same(float64(w), want) {
				t.Fatalf("%s: widen(%#04x) = %g, want %g", f.name, h, w, want)
			}
			quiet := uint16(1) << (f.mBits - 1)
			if back := f.narrow(w); w == w && back != h || w != w && back != h|quiet {
				t.Fatalf("%s: %#04x -> %g -> %#04x", f.name, h, w, back)
			}
		}
	}
}

// TestHalfNarrowTiesAndNeighbours checks, for every pair of adjacent values
// of both formats and both signs, the exact midpoint (ties to even) and the
// float32 values on either side of it; the pair (max finite, Inf) included.
func TestHalfNarrowTiesAndNeighbours(t *testing.T) {
	for _, f := range []format{fp16, bf16} {
		for h := uint16(0); h <= f.maxFinite; h++ {
			for _, sign := range []uint16{0, 0x8000} {
				a := f.refDecode(h | sign)
				b := f.refDecode((h + 1) | sign)
				if h == f.maxFinite { // the next binade's first value stands in for Inf
					b = math.Copysign(math.Ldexp(1, f.bias()+1), a)
				}
				mid := float32((a + b) / 2) // exact: one bit more than the format
				f.checkNarrow(t, mid)
				f.checkNarrow(t, math.Nextafter32(mid, float32(a)))
				f.checkNarrow(t, math.Nextafter32(mid, float32(b)))
				f.checkNarrow(t, float32(a))
			}
		}
	}
}

// TestHalfNarrowSweep checks a strided sweep over all float32 bit patterns
// (every exponent, subnormals and overflow included) and random mantissas in
// the subnormal/normal boundary region of fp16.
func TestHalfNarrowSweep(t *testing.T) {
	for b := uint64(0); b < 1<<32; b += 1021 {
		x := math.Float32frombits(uint32(b))
		if x != x {
			continue
		}
		fp16.checkNarrow(t, x)
		bf16.checkNarrow(t, x)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		x := float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(24)-30)) // 2^-31 .. 2^-7
		fp16.checkNarrow(t, x)
		fp16.checkNarrow(t, -x)
	}
}

func TestHalfEdgeCases(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	f16 := map[float32]uint16{
		0: 0, float32(math.Copysign(0, -1)): 0x8000, 1: 0x3c00, -2: 0xc000,
		65504: 0x7bff, 65519.99: 0x7bff, 65520: 0x7c00, -1e10: 0xfc00,
		float32(math.Inf(1)): 0x7c00, p(-14): 0x0400, p(-24): 0x0001,
		p(-25): 0, 3 * p(-25): 0x0002, p(-14) - p(-25): 0x0400, 1 + p(-11): 0x3c00,
		1 + 3*p(-11): 0x3c02, math.SmallestNonzeroFloat32: 0, -1e-10: 0x8000,
	}
	for in, want := range f16 {
		if got := F32ToF16Bits(in); got != want {
			t.Errorf("F32ToF16Bits(%g) = %#04x, want %#04x", in, got, want)
		}
	}
	bf := map[uint32]uint16{
		0x3f808000: 0x3f80, 0x3f818000: 0x3f82, 0x3f808001: 0x3f81, 0x7f7fffff: 0x7f80,
		0x7f7f7fff: 0x7f7f, 0xff800000: 0xff80, 0x00000001: 0, 0x00018000: 0x0002,
	}
	for in, want := range bf {
		if got := F32ToBF16Bits(math.Float32frombits(in)); got != want {
			t.Errorf("F32ToBF16Bits(%#08x) = %#04x, want %#04x", in, got, want)
		}
	}
}

// TestHalfNaN: every NaN, including those whose payload sits only in bits
// the format drops, stays a NaN of the same sign, in both the bit and the
// rounding functions.
func TestHalfNaN(t *testing.T) {
	for _, nb := range []uint32{0x7fc00000, 0x7f800001, 0xff800100, 0x7fffffff, 0xffc00001} {
		x := math.Float32frombits(nb)
		for _, f := range []format{fp16, bf16} {
			h := f.narrow(x)
			if w := f.widen(h); w == w || math.Signbit(float64(w)) != (nb>>31 == 1) {
				t.Errorf("%s: narrow(NaN %#08x) = %#04x, not a NaN of that sign", f.name, nb, h)
			}
			if r := f.round(x); r == r || math.Float32bits(r) != math.Float32bits(f.widen(h)) {
				t.Errorf("%s: round(NaN %#08x) = %#08x, want %#08x", f.name, nb, math.Float32bits(r), math.Float32bits(f.widen(h)))
			}
		}
	}
}
