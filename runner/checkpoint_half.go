package runner

import "math"

// Conversions between float32 and the 2-byte float formats checkpoints
// store. Both narrowings round to nearest, ties to even, as CUDA's
// __float2half_rn / __float2bfloat16_rn and PyTorch do.

// f32ToF16 converts to IEEE 754 binary16 bits. Values beyond the f16 range
// become ±Inf, NaN stays NaN (quiet), tiny values become subnormals or ±0.
func f32ToF16(f float32) uint16 {
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
	e := exp - 127 + 15 // f16 biased exponent
	switch {
	case e >= 31:
		return sign | 0x7c00
	case e <= 0:
		if e < -10 { // below half the smallest subnormal: rounds to zero
			return sign
		}
		// A subnormal: the value in units of 2^-24 is m >> (14-e).
		return sign | uint16(shiftRoundEven(mant|0x800000, uint(14-e)))
	}
	// Rounding may carry into the exponent; a carry out of the largest
	// finite value lands exactly on the Inf encoding, as it should.
	return sign | uint16(shiftRoundEven(uint32(e)<<23|mant, 13))
}

// shiftRoundEven is m >> s rounded to nearest, ties to even.
func shiftRoundEven(m uint32, s uint) uint32 {
	r := m >> s
	rem := m & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || rem == half && r&1 == 1 {
		r++
	}
	return r
}

// f16ToF32 widens binary16 bits exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0: // zero or subnormal: mant x 2^-24, exact in float32
		v := float32(mant) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(v) | sign)
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | mant<<13)
}

// f32ToBF16 keeps the top 16 bits of a float32, rounded to nearest even.
func f32ToBF16(f float32) uint16 {
	bits := math.Float32bits(f)
	if f != f { // NaN: keep it a (quiet) NaN even if rounding would clear the mantissa
		return uint16(bits>>16) | 0x40
	}
	return uint16(shiftRoundEven(bits, 16)) // at most 0xffff: no overflow
}

// bf16ToF32 widens bfloat16 bits exactly.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
