package parallel

import (
	"math"

	"resnetlab/kernels"
)

// roundTo rounds xs in place to the nearest value of dt (ties to even), as
// the CPU backend stores fp16/bf16 tensors: float32 values already rounded.
func roundTo(dt kernels.DType, xs []float32) {
	switch dt {
	case kernels.F16:
		for i, v := range xs {
			xs[i] = roundF16(v)
		}
	case kernels.BF16:
		for i, v := range xs {
			xs[i] = roundBF16(v)
		}
	}
}

func roundBF16(v float32) float32 {
	if v != v {
		return v
	}
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1 // round to nearest even on the top 16 bits
	return math.Float32frombits(b &^ 0xffff)
}

const (
	f16Min    = 1.0 / 16384 // smallest normal fp16, 2^-14
	f16Halfup = 65520       // values from here round to +inf (ties to even)
)

func roundF16(v float32) float32 {
	a := float32(math.Abs(float64(v)))
	switch {
	case v != v || math.IsInf(float64(v), 0):
		return v
	case a >= f16Halfup:
		return float32(math.Copysign(math.Inf(1), float64(v)))
	case a < f16Min:
		// Subnormals are multiples of 2^-24, the ulp of float32 in [0.5,1):
		// adding and removing 0.5 rounds a to that grid, ties to even.
		t := float32(a + 0.5)
		return float32(math.Copysign(float64(float32(t-0.5)), float64(v)))
	}
	b := math.Float32bits(v)
	b += 0xfff + (b>>13)&1 // keep 10 mantissa bits, ties to even
	return math.Float32frombits(b &^ 0x1fff)
}
