package cuda

import (
	"math"
	"math/rand"
	"testing"
)

// TestF16RoundTrip: every binary16 value widens and narrows back to itself.
func TestF16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			if F32ToF16(f)&0x7c00 != 0x7c00 || F32ToF16(f)&0x3ff == 0 {
				t.Fatalf("NaN %#04x narrowed to %#04x", h, F32ToF16(f))
			}
			continue
		}
		if got := F32ToF16(f); got != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, got)
		}
	}
}

// nearest returns the representable value closest to f among sorted
// candidates lo < hi (ties to the even encoding), the naive reference.
func nearest(f float64, lo, hi uint16, widen func(uint16) float32) uint16 {
	dl, dh := f-float64(widen(lo)), float64(widen(hi))-f
	switch {
	case dl < dh:
		return lo
	case dh < dl:
		return hi
	case lo&1 == 0:
		return lo
	}
	return hi
}

// TestNarrowingRoundsToNearestEven compares F32ToF16 and F32ToBF16 with a
// brute-force nearest neighbour on random floats of every magnitude.
func TestNarrowingRoundsToNearestEven(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		f := float32(math.Ldexp(rng.Float64()+0.5, rng.Intn(44)-30)) // about 2^-30 .. 2^14
		if i%4 == 0 {                                                // exact ties
			h := uint16(rng.Intn(0x7bfe))
			f = float32((float64(F16ToF32(h)) + float64(F16ToF32(h+1))) / 2)
		}
		h := F32ToF16(f)
		lo := h
		if F16ToF32(h) > f {
			lo = h - 1
		}
		if F16ToF32(lo+1) <= 65504 && float64(f) < 65520 {
			if want := nearest(float64(f), lo, lo+1, F16ToF32); want != h {
				t.Fatalf("F32ToF16(%g) = %#04x (%g), want %#04x (%g)", f, h, F16ToF32(h), want, F16ToF32(want))
			}
		}
		b := F32ToBF16(f)
		lob := b
		if BF16ToF32(b) > f {
			lob = b - 1
		}
		if want := nearest(float64(f), lob, lob+1, BF16ToF32); want != b {
			t.Fatalf("F32ToBF16(%g) = %#04x, want %#04x", f, b, want)
		}
	}
	if F32ToF16(70000) != 0x7c00 || F32ToF16(-1e-10) != 0x8000 {
		t.Fatalf("overflow/underflow: %#04x %#04x", F32ToF16(70000), F32ToF16(-1e-10))
	}
}
