package cpu

import "resnetlab/kernels"

// RoundF16 is kernels.RoundF16, the rounding the CPU backend applies to
// every element it writes to an F16 tensor. It stays here for callers of
// this package; both wrappers inline, so they cost nothing.
func RoundF16(f float32) float32 { return kernels.RoundF16(f) }

// RoundBF16 is kernels.RoundBF16, the rounding for BF16 tensors.
func RoundBF16(f float32) float32 { return kernels.RoundBF16(f) }
