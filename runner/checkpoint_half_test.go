package runner

import (
	"math"
	"testing"
)

// refF16 decodes binary16 bits straight from the IEEE 754 definition.
func refF16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, mant := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(mant, -24)
	case 31:
		if mant != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+mant/1024, exp-15)
}

func TestF16Widen(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got, want := float64(f16ToF32(uint16(h))), refF16(uint16(h))
		if math.IsNaN(want) != math.IsNaN(got) || !math.IsNaN(want) && got != want ||
			want == 0 && math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("f16ToF32(%#04x) = %v, want %v", h, got, want)
		}
	}
}

func TestF16RoundTripAndNaN(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := f16ToF32(uint16(h))
		back := f32ToF16(f)
		if f != f {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x narrowed to non-NaN %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
}

// checkNarrowing checks ties-to-even and nearest rounding between every
// pair of adjacent finite values of a 2-byte format (positive and negative).
func checkNarrowing(t *testing.T, name string, widen func(uint16) float32, narrow func(float32) uint16, maxFinite uint16) {
	for h := uint16(0); h < maxFinite; h++ {
		for _, sign := range []uint16{0, 0x8000} {
			lo, hi := h|sign, (h+1)|sign
			a, b := float64(widen(lo)), float64(widen(hi))
			mid := float32((a + b) / 2) // exact: needs only one more bit than the format
			even := lo
			if lo&1 == 1 {
				even = hi
			}
			if got := narrow(mid); got != even {
				t.Fatalf("%s: midpoint %v of %#04x/%#04x -> %#04x, want %#04x (ties to even)", name, mid, lo, hi, got, even)
			}
			toHi := float32(math.Nextafter32(mid, float32(b)))
			toLo := float32(math.Nextafter32(mid, float32(a)))
			if narrow(toHi) != hi || narrow(toLo) != lo {
				t.Fatalf("%s: values beside %v do not round to the nearer of %#04x/%#04x", name, mid, lo, hi)
			}
		}
	}
}

func TestF16Narrowing(t *testing.T) {
	checkNarrowing(t, "f16", f16ToF32, f32ToF16, 0x7bff)
	cases := map[float32]uint16{
		65504: 0x7bff, 65519.99: 0x7bff, 65520: 0x7c00, 1e10: 0x7c00, -1e10: 0xfc00,
		float32(math.Inf(1)): 0x7c00, 1e-10: 0, -1e-10: 0x8000, 1: 0x3c00, -2: 0xc000,
	}
	for in, want := range cases {
		if got := f32ToF16(in); got != want {
			t.Errorf("f32ToF16(%v) = %#04x, want %#04x", in, got, want)
		}
	}
}

func TestBF16(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := bf16ToF32(uint16(h))
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("bf16ToF32(%#04x) bits %#08x", h, math.Float32bits(f))
		}
		back := f32ToBF16(f)
		if f != f {
			if back&0x7f80 != 0x7f80 || back&0x7f == 0 {
				t.Fatalf("NaN %#04x narrowed to non-NaN %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("bf16 %#04x -> %#04x", h, back)
		}
	}
	checkNarrowing(t, "bf16", bf16ToF32, f32ToBF16, 0x7f7f)
	// A NaN whose payload sits only in the low bits must stay NaN.
	if got := f32ToBF16(math.Float32frombits(0x7f800001)); got&0x7f == 0 {
		t.Fatalf("low-payload NaN became %#04x", got)
	}
	if got := f32ToBF16(math.MaxFloat32); got != 0x7f80 {
		t.Fatalf("MaxFloat32 -> %#04x, want Inf (0x7f80)", got)
	}
}
