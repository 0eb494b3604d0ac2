package cuda

import (
	"math"

	"resnetlab/kernels"
)

// F32ToF16 rounds f to the nearest IEEE binary16 (ties to even), with
// overflow to infinity and gradual underflow, as __float2half_rn does.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // binary16 subnormal (or zero): value = m * 2^-24
		if e < -10 {
			return sign
		}
		man |= 0x800000
		return sign | uint16(roundShift(man, uint(14-e)))
	}
	// A carry out of the mantissa correctly bumps the exponent (to inf at most).
	return sign | uint16(roundShift(uint32(e)<<23|man, 13))
}

// roundShift is v >> s rounded to nearest, ties to even.
func roundShift(v uint32, s uint) uint32 {
	r := v >> s
	rem := v & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || rem == half && r&1 == 1 {
		r++
	}
	return r
}

// F16ToF32 widens a binary16 value exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		v := float32(man) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// F32ToBF16 rounds f to bfloat16 (ties to even), keeping NaNs quiet.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BF16ToF32 widens a bfloat16 value exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

func encodeHalf(src []float32, dt kernels.DType) []uint16 {
	h := make([]uint16, len(src))
	conv := F32ToF16
	if dt == kernels.BF16 {
		conv = F32ToBF16
	}
	for i, v := range src {
		h[i] = conv(v)
	}
	return h
}

func decodeHalf(h []uint16, dt kernels.DType, dst []float32) {
	conv := F16ToF32
	if dt == kernels.BF16 {
		conv = BF16ToF32
	}
	for i, v := range h {
		dst[i] = conv(v)
	}
}
