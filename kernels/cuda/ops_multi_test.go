package cuda

import (
	"testing"

	"resnetlab/kernels"
)

// vec4 admits the adam kernels' 4-wide accesses only where every tensor
// starts on a 4-element boundary: 16 bytes for fp32, 8 for fp16/bf16.
func TestAdamVec4(t *testing.T) {
	at := func(dt kernels.DType, dev uintptr) *kernels.Tensor {
		return &kernels.Tensor{Shape: []int{8}, DType: dt, Dev: dev}
	}
	for _, c := range []struct {
		ts   []*kernels.Tensor
		want int32
	}{
		{[]*kernels.Tensor{at(kernels.F32, 0x1000), at(kernels.F16, 0x2000)}, 1},
		{[]*kernels.Tensor{at(kernels.F32, 0x1010), at(kernels.BF16, 0x2008)}, 1}, // views at 4 elements
		{[]*kernels.Tensor{at(kernels.F32, 0x1008), at(kernels.F16, 0x2000)}, 0},  // fp32 view at 2 elements
		{[]*kernels.Tensor{at(kernels.F32, 0x1000), at(kernels.F16, 0x2004)}, 0},  // fp16 view at 2 elements
		{[]*kernels.Tensor{at(kernels.F32, 0x1004), at(kernels.BF16, 0x2002)}, 0}, // views at 1 element
		{[]*kernels.Tensor{at(kernels.F32, 0x1000), nil}, 1},                      // no copy
	} {
		if got := vec4(c.ts...); got != c.want {
			t.Errorf("vec4 of addresses %v = %d, want %d", addrs(c.ts), got, c.want)
		}
	}
}

func addrs(ts []*kernels.Tensor) []uintptr {
	var a []uintptr
	for _, t := range ts {
		if t != nil {
			a = append(a, t.Dev)
		}
	}
	return a
}
