package cpu

import "math"

// F32ToF16Bits converts a float32 to IEEE 754 binary16 bits with
// round-to-nearest-even. Values beyond the fp16 range become ±inf, tiny
// values become fp16 subnormals or ±0, NaN stays a (quiet) NaN.
func F32ToF16Bits(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23) & 0xff
	mant := bits & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // fp16 biased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal (or zero) in fp16: value = m * 2^-24 with
		// m = (1.mant) * 2^(exp-126) = full >> (126-exp).
		shift := uint(126 - exp)
		if exp == 0 || shift > 24 {
			return sign // fp32 subnormals and values < 2^-25 round to ±0
		}
		full := mant | 0x800000
		m := full >> shift
		rem := full & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && m&1 == 1) {
			m++ // may carry into the smallest normal, which encodes correctly
		}
		return sign | uint16(m)
	}
	m := mant >> 13
	rem := mant & 0x1fff
	h := uint32(e)<<10 | m
	if rem > 0x1000 || (rem == 0x1000 && m&1 == 1) {
		h++ // a carry into the exponent is right, up to +inf
	}
	return sign | uint16(h)
}

// F16BitsToF32 converts IEEE 754 binary16 bits to float32 (exactly).
func F16BitsToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		// Subnormal: normalise the mantissa.
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToBF16Bits converts a float32 to bfloat16 bits with
// round-to-nearest-even; NaN stays a (quiet) NaN.
func F32ToBF16Bits(f float32) uint16 {
	bits := math.Float32bits(f)
	if bits&0x7fffffff > 0x7f800000 {
		return uint16(bits>>16) | 0x40
	}
	bits += 0x7fff + (bits>>16)&1
	return uint16(bits >> 16)
}

// BF16BitsToF32 converts bfloat16 bits to float32 (exactly).
func BF16BitsToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundF16 rounds a float32 to the nearest fp16 value (kept as float32).
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
	case abs >= 0x477ff000 && abs <= 0x7f800000: // rounds to +-inf
		return math.Float32frombits(bits&0x80000000 | 0x7f800000)
	case abs == 0: // ReLU outputs: very common
		return f
	}
	return F16BitsToF32(F32ToF16Bits(f)) // zero, subnormals, NaN
}

// RoundBF16 rounds a float32 to the nearest bf16 value (kept as float32).
func RoundBF16(f float32) float32 {
	bits := math.Float32bits(f)
	if bits&0x7fffffff > 0x7f800000 {
		return math.Float32frombits((bits | 0x400000) &^ 0xffff)
	}
	bits += 0x7fff + (bits>>16)&1
	return math.Float32frombits(bits &^ 0xffff)
}
