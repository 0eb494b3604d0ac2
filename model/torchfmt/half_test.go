package torchfmt

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestF16DecodeMatchesReference(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got, want := f16ToF32(uint16(h)), refF16(uint16(h))
		if !sameFloat(got, want) {
			t.Fatalf("f16ToF32(%#04x) = %g, want %g", h, got, want)
		}
	}
}

func TestF16ExhaustiveRoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got := f32ToF16(f16ToF32(uint16(h)))
		isNaN := h&0x7c00 == 0x7c00 && h&0x3ff != 0
		if isNaN {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 || got&0x8000 != uint16(h)&0x8000 {
				t.Fatalf("NaN %#04x came back as %#04x", h, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Fatalf("f32ToF16(f16ToF32(%#04x)) = %#04x", h, got)
		}
	}
}

// refF32ToF16 rounds to the nearest binary16 by searching the sorted table of all
// non-negative half values, ties to the even bit pattern; 0x7c00 stands for 65536,
// where an unbounded exponent would put the next value, so overflow rounds like
// IEEE does.
func refF32ToF16(table []float64, f float32) uint16 {
	x := float64(f)
	sign := uint16(0)
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if math.IsNaN(x) {
		return 0x7e00
	}
	if x >= 65536 {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(table, x) // table[i-1] < x <= table[i]
	if table[i] == x {
		return sign | uint16(i)
	}
	lo, hi := i-1, i
	dl, dh := x-table[lo], table[hi]-x
	if dl < dh || (dl == dh && lo%2 == 0) {
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}

func halfTable() []float64 {
	table := make([]float64, 0x7c01)
	for h := range 0x7c00 {
		table[h] = float64(refF16(uint16(h)))
	}
	table[0x7c00] = 65536
	return table
}

func TestF32ToF16RoundingMatchesReference(t *testing.T) {
	table := halfTable()
	rng := rand.New(rand.NewPCG(1, 2))
	var inputs []float32
	for range 200000 { // random magnitudes across the whole half range and beyond
		inputs = append(inputs, float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(50)-30))*float32(1-2*rng.IntN(2)))
	}
	for h := 0; h < 0x7c00; h++ { // exact midpoints and their f32 neighbours
		mid := float32((table[h] + table[h+1]) / 2)
		inputs = append(inputs, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9), -mid)
	}
	inputs = append(inputs, 65504, 65519.99, 65520, 1e10, float32(math.Inf(1)), 0, float32(math.Copysign(0, -1)), 1e-45)
	for _, f := range inputs {
		if got, want := f32ToF16(f), refF32ToF16(table, f); got != want {
			t.Fatalf("f32ToF16(%g) = %#04x, want %#04x", f, got, want)
		}
	}
}

// refF32ToBF16 picks the nearer of the two bf16 neighbours in float64, ties to
// even; the pattern past the largest finite value stands for 2^128.
func refF32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	lo := b &^ 0xffff
	hiBits := lo + 0x10000
	x := math.Abs(float64(f))
	lv := math.Abs(float64(math.Float32frombits(lo)))
	hv := math.Ldexp(1, 128)
	if hiBits&0x7f800000 != 0x7f800000 {
		hv = math.Abs(float64(math.Float32frombits(hiBits)))
	}
	dl, dh := x-lv, hv-x
	if dl < dh || (dl == dh && (lo>>16)%2 == 0) {
		return uint16(lo >> 16)
	}
	return uint16(hiBits >> 16)
}

func TestF32ToBF16RoundingMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 500000 {
		b := rng.Uint32()
		if i%4 == 0 { // force exact ties and near-ties
			b = b&^0xffff | 0x8000 + uint32(rng.IntN(3)) - 1
		}
		f := math.Float32frombits(b)
		if f != f {
			got := f32ToBF16(f)
			if got&0x7f80 != 0x7f80 || got&0x7f == 0 {
				t.Fatalf("NaN %#08x became non-NaN %#04x", b, got)
			}
			continue
		}
		if got, want := f32ToBF16(f), refF32ToBF16(f); got != want {
			t.Fatalf("f32ToBF16(%#08x) = %#04x, want %#04x", b, got, want)
		}
	}
	for h := 0; h < 1<<16; h++ { // widening is exact, so narrowing must invert it
		if f := bf16ToF32(uint16(h)); f == f && f32ToBF16(f) != uint16(h) {
			t.Fatalf("bf16 %#04x did not round-trip", h)
		}
	}
}
