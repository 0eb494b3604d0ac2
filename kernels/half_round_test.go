package kernels

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The fast paths of RoundF16 and RoundBF16 must agree bit for bit with the
// exact conversions on a dense sample of all float32 bit patterns.
func TestRoundMatchesConversions(t *testing.T) {
	for b := uint64(0); b < 1<<32; b += 97 {
		f := math.Float32frombits(uint32(b))
		if got, want := RoundF16(f), F16BitsToF32(F32ToF16Bits(f)); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("RoundF16(%#08x) = %#08x, want %#08x", b, math.Float32bits(got), math.Float32bits(want))
		}
		if got, want := RoundBF16(f), BF16BitsToF32(F32ToBF16Bits(f)); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("RoundBF16(%#08x) = %#08x, want %#08x", b, math.Float32bits(got), math.Float32bits(want))
		}
	}
}

func TestEncodeDecodeHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	src := make([]float32, 1000)
	for i := range src {
		src[i] = math.Float32frombits(rng.Uint32())
	}
	for _, f := range []format{fp16, bf16} {
		dt := map[string]DType{"fp16": F16, "bf16": BF16}[f.name]
		h := make([]uint16, len(src))
		EncodeHalf(h, src, dt)
		back := make([]float32, len(h))
		DecodeHalf(back, h, dt)
		for i, v := range src {
			if h[i] != f.narrow(v) || math.Float32bits(back[i]) != math.Float32bits(f.widen(h[i])) {
				t.Fatalf("%s: element %d (%#08x): encoded %#04x, decoded %#08x", f.name, i, math.Float32bits(v), h[i], math.Float32bits(back[i]))
			}
		}
	}
}

func TestEncodeDecodeHalfPanics(t *testing.T) {
	cases := map[string]func(){
		"dtype fp32":      func() { EncodeHalf(make([]uint16, 1), make([]float32, 1), F32) },
		"2 values into 1": func() { EncodeHalf(make([]uint16, 1), make([]float32, 2), F16) },
		"3 values into 2": func() { DecodeHalf(make([]float32, 2), make([]uint16, 3), BF16) },
	}
	for want, call := range cases {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, want) {
					t.Errorf("panic %q, want it to mention %q", msg, want)
				}
			}()
			call()
		}()
	}
}
