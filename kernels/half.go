package kernels

import (
	"fmt"
	"math"
)

// The one implementation of the 2-byte float formats, shared by the CPU
// backend's mixed-precision emulation, the CUDA backend's host<->device
// copies and the checkpoint formats. Both narrowings round to nearest, ties
// to even, as CUDA's __float2half_rn / __float2bfloat16_rn and PyTorch do.

// F32ToF16Bits converts a float32 to IEEE 754 binary16 bits. Values beyond
// the fp16 range become ±Inf, tiny values become subnormals or ±0, NaN stays
// a quiet NaN that keeps its sign and the top of its payload.
func F32ToF16Bits(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23) & 0xff
	mant := bits & 0x7fffff
	if exp == 0xff { // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // fp16 biased exponent
	switch {
	case e >= 0x1f:
		return sign | 0x7c00
	case e < -10: // below half the smallest subnormal (fp32 subnormals too): ±0
		return sign
	case e <= 0:
		// A subnormal: the value in units of 2^-24 is (1.mant) >> (14-e).
		// Rounding up may carry into the smallest normal, which encodes right.
		return sign | uint16(roundShift(mant|0x800000, uint(14-e)))
	}
	// A carry out of the mantissa bumps the exponent; a carry out of the
	// largest finite value lands exactly on the Inf encoding, as it should.
	return sign | uint16(roundShift(uint32(e)<<23|mant, 13))
}

// roundShift is v >> s rounded to nearest, ties to even (1 <= s < 32).
func roundShift(v uint32, s uint) uint32 {
	r := v >> s
	rem := v & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || rem == half && r&1 == 1 {
		r++
	}
	return r
}

// F16BitsToF32 widens IEEE 754 binary16 bits to float32 exactly.
func F16BitsToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0: // zero or subnormal: mant * 2^-24, exact in float32
		v := float32(mant) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(v) | sign)
	case 0x1f: // Inf or NaN, payload kept
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | mant<<13)
}

// F32ToBF16Bits converts a float32 to bfloat16 bits (its top 16 bits,
// rounded to nearest even). NaN stays a quiet NaN even when rounding would
// clear its mantissa; a value past the largest finite bf16 becomes ±Inf.
func F32ToBF16Bits(f float32) uint16 {
	bits := math.Float32bits(f)
	if bits&0x7fffffff > 0x7f800000 {
		return uint16(bits>>16) | 0x40
	}
	// Adding 0x7fff plus the kept lsb carries into bit 16 exactly when the
	// dropped half is above the tie, or at it with an odd kept part.
	return uint16((bits + 0x7fff + (bits>>16)&1) >> 16)
}

// BF16BitsToF32 widens bfloat16 bits to float32 exactly.
func BF16BitsToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundF16 rounds a float32 to the nearest fp16 value, kept as float32; it
// equals F16BitsToF32(F32ToF16Bits(f)).
//
// Mixed-precision emulation rounds every element an op writes, so the
// normal range (all but zeros, subnormals, overflow and NaN) takes a bit
// trick on the float32 itself: keep 10 mantissa bits, ties to even.
func RoundF16(f float32) float32 {
	bits := math.Float32bits(f)
	abs := bits & 0x7fffffff
	switch {
	case abs >= 0x38800000 && abs < 0x477ff000: // [2^-14, 65520): fp16 normals
		bits += 0xfff + (bits>>13)&1
		return math.Float32frombits(bits &^ 0x1fff)
	case abs >= 0x477ff000 && abs <= 0x7f800000: // rounds to ±Inf
		return math.Float32frombits(bits&0x80000000 | 0x7f800000)
	case abs == 0: // ReLU outputs: very common
		return f
	}
	return F16BitsToF32(F32ToF16Bits(f)) // subnormals, NaN
}

// RoundBF16 rounds a float32 to the nearest bf16 value, kept as float32; it
// equals BF16BitsToF32(F32ToBF16Bits(f)).
func RoundBF16(f float32) float32 {
	bits := math.Float32bits(f)
	if bits&0x7fffffff > 0x7f800000 {
		return math.Float32frombits((bits | 0x400000) &^ 0xffff)
	}
	bits += 0x7fff + (bits>>16)&1
	return math.Float32frombits(bits &^ 0xffff)
}

// EncodeHalf narrows src into dst (same length) as F16 or BF16 bits.
func EncodeHalf(dst []uint16, src []float32, dt DType) {
	convertHalf("EncodeHalf", dst, src, dt, F32ToF16Bits, F32ToBF16Bits)
}

// DecodeHalf widens F16 or BF16 bits in src into dst (same length).
func DecodeHalf(dst []float32, src []uint16, dt DType) {
	convertHalf("DecodeHalf", dst, src, dt, F16BitsToF32, BF16BitsToF32)
}

// convertHalf applies the F16 or BF16 conversion, by dt, element-wise.
func convertHalf[S, D any](op string, dst []D, src []S, dt DType, f16, bf16 func(S) D) {
	if dt != F16 && dt != BF16 {
		panic(fmt.Sprintf("kernels: %s: dtype %v, want fp16 or bf16", op, dt))
	}
	if len(dst) != len(src) {
		panic(fmt.Sprintf("kernels: %s: %d values into %d", op, len(src), len(dst)))
	}
	conv := f16
	if dt == BF16 {
		conv = bf16
	}
	for i, v := range src {
		dst[i] = conv(v)
	}
}
