package cpu

import (
	"math"
	"sort"
	"testing"
)

func TestF16EdgeCases(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},                // max finite
		{65519, 0x7bff},                // below the midpoint to 65536
		{65520, 0x7c00},                // midpoint: ties to even = overflow to inf
		{1e6, 0x7c00},                  // overflow
		{-1e6, 0xfc00},                 // negative overflow
		{float32(math.Inf(1)), 0x7c00}, //
		{p(-14), 0x0400},               // smallest normal
		{p(-24), 0x0001},               // smallest subnormal
		{p(-25), 0x0000},               // tie between 0 and 2^-24: even is 0
		{p(-25) * 1.0001, 0x0001},      // just above the tie
		{3 * p(-25), 0x0002},           // tie between 1 and 2 ulps: even is 2
		{p(-14) - p(-25), 0x0400},      // tie between max subnormal and min normal: rounds up
		{1 + p(-11), 0x3c00},           // tie: stays at even 1.0
		{1 + 3*p(-11), 0x3c02},         // tie: rounds up to even
		{1 + p(-11) + p(-20), 0x3c01},  // above the tie
		{p(-30), 0x0000},               // underflow
		{float32(math.SmallestNonzeroFloat32), 0},
	}
	for _, c := range cases {
		if got := F32ToF16Bits(c.in); got != c.want {
			t.Errorf("F32ToF16Bits(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	nan := float32(math.NaN())
	if h := F32ToF16Bits(nan); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("F32ToF16Bits(NaN) = %#04x, not a NaN", h)
	}
	if r := RoundF16(nan); r == r {
		t.Errorf("RoundF16(NaN) = %v", r)
	}
	// A NaN whose payload sits only in the low mantissa bits stays NaN.
	if h := F32ToF16Bits(math.Float32frombits(0x7f800001)); h&0x3ff == 0 {
		t.Errorf("signalling NaN became %#04x", h)
	}
}

// TestF16AllValues round-trips every fp16 value and checks F16BitsToF32
// against the definition of the format.
func TestF16AllValues(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16BitsToF32(uint16(h))
		e, m := (h>>10)&0x1f, h&0x3ff
		var want float64
		switch {
		case e == 0x1f && m != 0:
			if f == f {
				t.Fatalf("F16BitsToF32(%#04x) = %v, want NaN", h, f)
			}
			continue
		case e == 0x1f:
			want = math.Inf(1)
		case e == 0:
			want = math.Ldexp(float64(m), -24)
		default:
			want = math.Ldexp(float64(m|0x400), e-25)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("F16BitsToF32(%#04x) = %v, want %v", h, f, want)
		}
		if back := F32ToF16Bits(f); back != uint16(h) {
			t.Fatalf("round trip of %#04x gave %#04x", h, back)
		}
	}
}

// TestRoundF16Random compares RoundF16 with a search over the sorted fp16
// values: nearest in float64, ties to the even bit pattern.
func TestRoundF16Random(t *testing.T) {
	var vals []float64 // positive finite fp16 values, ascending
	for h := 0; h < 0x7c00; h++ {
		vals = append(vals, float64(F16BitsToF32(uint16(h))))
	}
	rng := newRNG(21)
	for i := 0; i < 200000; i++ {
		// Random bits over the interesting exponent range [2^-27, 2^17).
		bits := uint32(100+rng.IntN(44))<<23 | rng.Uint32()&0x7fffff
		x := math.Float32frombits(bits)
		want := refRoundF16(vals, float64(x))
		if got := RoundF16(x); float64(got) != want {
			t.Fatalf("RoundF16(%g) = %g, want %g", x, got, want)
		}
		if got := RoundF16(-x); float64(got) != -want {
			t.Fatalf("RoundF16(%g) = %g, want %g", -x, got, -want)
		}
	}
}

func refRoundF16(vals []float64, x float64) float64 {
	if x >= 65520 { // half-way between max and 2^16 and above: inf
		return math.Inf(1)
	}
	i := sort.SearchFloat64s(vals, x)
	if i < len(vals) && vals[i] == x {
		return x
	}
	lo, hi := vals[i-1], 65536.0
	if i < len(vals) {
		hi = vals[i]
	}
	switch d := (x - lo) - (hi - x); {
	case d < 0:
		return lo
	case d > 0:
		return hi
	}
	if (i-1)&1 == 0 { // index i-1 is the bit pattern of lo
		return lo
	}
	return hi
}

func TestBF16(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie: stays even
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie: rounds up to even
		{math.Float32frombits(0x3f808001), 0x3f81}, // above the tie
		{math.MaxFloat32, 0x7f80},                  // rounds up past the max: inf
		{math.Float32frombits(0x7f7f7fff), 0x7f7f}, // max finite bf16 region
		{float32(math.Inf(-1)), 0xff80},
		{math.Float32frombits(0x00000001), 0x0000}, // subnormal rounds to 0
		{math.Float32frombits(0x00018000), 0x0002}, // subnormal tie to even
	}
	for _, c := range cases {
		if got := F32ToBF16Bits(c.in); got != c.want {
			t.Errorf("F32ToBF16Bits(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
		if got, want := RoundBF16(c.in), BF16BitsToF32(c.want); math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("RoundBF16(%g) = %g, want %g", c.in, got, want)
		}
	}
	for _, nb := range []uint32{0x7fc00000, 0x7f800001, 0xff800100} {
		nan := math.Float32frombits(nb)
		if h := F32ToBF16Bits(nan); h&0x7f80 != 0x7f80 || h&0x7f == 0 {
			t.Errorf("F32ToBF16Bits(NaN %#x) = %#04x, not a NaN", nb, h)
		}
		if r := RoundBF16(nan); r == r || math.Float32bits(r)&0xffff != 0 {
			t.Errorf("RoundBF16(NaN %#x) = %#x", nb, math.Float32bits(r))
		}
	}
	rng := newRNG(22)
	for i := 0; i < 100000; i++ {
		x := math.Float32frombits(rng.Uint32()) // any bits
		if x != x || math.IsInf(float64(x), 0) {
			continue
		}
		lo := math.Float32frombits(math.Float32bits(x) &^ 0xffff)
		hi := math.Float32frombits(math.Float32bits(lo) + 0x10000)
		want, hv := float64(lo), float64(hi)
		if math.IsInf(hv, 0) { // rounding treats inf as the next step, ±2^128
			hv = math.Copysign(math.Ldexp(1, 128), hv)
		}
		dlo, dhi := math.Abs(float64(x)-float64(lo)), math.Abs(hv-float64(x))
		if dhi < dlo || (dhi == dlo && math.Float32bits(lo)&0x10000 != 0) {
			want = float64(hi)
		}
		if got := RoundBF16(x); float64(got) != want {
			t.Fatalf("RoundBF16(%g) = %g, want %g", x, got, want)
		}
	}
}
