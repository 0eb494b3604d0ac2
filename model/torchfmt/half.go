package torchfmt

import "math"

// f32ToF16 converts to IEEE binary16 with round-to-nearest-even, as torch's .half()
// does: overflow goes to infinity, tiny values to (signed) zero or subnormals, NaN
// stays a quiet NaN.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // rebiased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal result: value = M * 2^(exp-150), half = M >> (14-e).
		if e < -10 {
			return sign // below half the smallest subnormal: rounds to zero
		}
		return sign | uint16(roundShift(mant|0x800000, uint(14-e)))
	}
	// Normal: a carry out of the mantissa correctly bumps the exponent (to inf at most).
	return sign | uint16(roundShift(uint32(e)<<23|mant, 13))
}

// roundShift returns v >> s rounded to nearest, ties to even.
func roundShift(v uint32, s uint) uint32 {
	q := v >> s
	rem := v & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// f16ToF32 converts IEEE binary16 to float32 exactly.
func f16ToF32(h uint16) float32 {
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

// f32ToBF16 keeps the top 16 bits with round-to-nearest-even (torch's rounding);
// NaN stays a quiet NaN.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16(roundShift(b, 16))
}

// bf16ToF32 widens bfloat16 to float32 exactly.
func bf16ToF32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}
