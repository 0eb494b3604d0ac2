package cpu

import (
	"math"
	"testing"
)

// The fast normal-range path must agree with the exact conversion on a
// dense sample of all float32 bit patterns (every 97th).
func TestRoundF16FastPathExhaustive(t *testing.T) {
	for b := uint64(0); b < 1<<32; b += 97 {
		f := math.Float32frombits(uint32(b))
		got, want := RoundF16(f), F16BitsToF32(F32ToF16Bits(f))
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("%#x: got %#x want %#x", b, math.Float32bits(got), math.Float32bits(want))
		}
	}
}
