package torchfmt

import (
	"fmt"
	"math"

	"resnetlab/kernels"
)

// Supported dtypes, spelled as in safetensors.
const (
	F32  = "F32"
	F16  = "F16"
	BF16 = "BF16"
	I64  = "I64"
)

// Tensor is one named entry of a state dict. Float dtypes keep their values in F32,
// I64 keeps them in I64. A 0-dim tensor (torch's num_batches_tracked) has Shape [] and
// one value.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	F32   []float32
	I64   []int64
}

// maxElems bounds the element count of any tensor we read or write: far above any
// real model (4G elements) and low enough that products of dims cannot overflow.
const maxElems = 1 << 32

// Numel returns the number of elements the shape describes (1 for a 0-dim tensor).
func (t Tensor) Numel() int {
	n, _ := numel(t.Shape)
	return n
}

// numel multiplies dims, rejecting negative dims and products above maxElems.
func numel(shape []int) (int, error) {
	n := 1
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("dim %d is %d, want >= 0", i, d)
		}
		if d != 0 && n > maxElems/d {
			return 0, fmt.Errorf("shape %v has more than %d elements", shape, maxElems)
		}
		n *= d
	}
	return n, nil
}

// dtypeSize returns the bytes per element of a supported dtype, or 0.
func dtypeSize(dtype string) int {
	switch dtype {
	case F32:
		return 4
	case F16, BF16:
		return 2
	case I64:
		return 8
	}
	return 0
}

// validate checks a tensor before writing: known dtype, sane shape, and a value slice
// of exactly the right length in the field its dtype uses.
func (t Tensor) validate() error {
	if t.Name == "" {
		return fmt.Errorf("tensor with empty name")
	}
	if dtypeSize(t.DType) == 0 {
		return fmt.Errorf("tensor %q: dtype %q not supported (want F32, F16, BF16 or I64)", t.Name, t.DType)
	}
	n, err := numel(t.Shape)
	if err != nil {
		return fmt.Errorf("tensor %q: %v", t.Name, err)
	}
	if t.DType == I64 {
		if len(t.I64) != n || t.F32 != nil {
			return fmt.Errorf("tensor %q: I64 shape %v needs %d values in I64 (and none in F32), got %d in I64, %d in F32",
				t.Name, t.Shape, n, len(t.I64), len(t.F32))
		}
		return nil
	}
	if len(t.F32) != n || t.I64 != nil {
		return fmt.Errorf("tensor %q: %s shape %v needs %d values in F32 (and none in I64), got %d in F32, %d in I64",
			t.Name, t.DType, t.Shape, n, len(t.F32), len(t.I64))
	}
	return nil
}

// validateAll checks every tensor and that names are unique.
func validateAll(ts []Tensor) error {
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		if err := t.validate(); err != nil {
			return err
		}
		if seen[t.Name] {
			return fmt.Errorf("tensor name %q appears twice", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// appendLE appends the tensor's values in its on-disk dtype, little-endian.
func appendLE(buf []byte, t Tensor) []byte {
	switch t.DType {
	case F32:
		for _, v := range t.F32 {
			b := math.Float32bits(v)
			buf = append(buf, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
		}
	case F16:
		for _, v := range t.F32 {
			h := kernels.F32ToF16Bits(v)
			buf = append(buf, byte(h), byte(h>>8))
		}
	case BF16:
		for _, v := range t.F32 {
			h := kernels.F32ToBF16Bits(v)
			buf = append(buf, byte(h), byte(h>>8))
		}
	case I64:
		for _, v := range t.I64 {
			u := uint64(v)
			buf = append(buf, byte(u), byte(u>>8), byte(u>>16), byte(u>>24),
				byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
		}
	}
	return buf
}

// decodeElem decodes element i of little-endian raw data of the given dtype into t,
// at position j. Callers guarantee the bounds.
func decodeElem(t *Tensor, j int, raw []byte, i int) {
	switch t.DType {
	case F32:
		p := raw[4*i:]
		t.F32[j] = math.Float32frombits(uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24)
	case F16:
		t.F32[j] = kernels.F16BitsToF32(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
	case BF16:
		t.F32[j] = kernels.BF16BitsToF32(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
	case I64:
		p := raw[8*i:]
		var u uint64
		for k := 7; k >= 0; k-- {
			u = u<<8 | uint64(p[k])
		}
		t.I64[j] = int64(u)
	}
}

// newTensor allocates the value slice for n elements of dtype.
func newTensor(name, dtype string, shape []int, n int) Tensor {
	t := Tensor{Name: name, DType: dtype, Shape: shape}
	if dtype == I64 {
		t.I64 = make([]int64, n)
	} else {
		t.F32 = make([]float32, n)
	}
	return t
}

// decodeContiguous turns n packed little-endian elements into a tensor.
func decodeContiguous(name, dtype string, shape []int, n int, raw []byte) Tensor {
	t := newTensor(name, dtype, shape, n)
	for i := 0; i < n; i++ {
		decodeElem(&t, i, raw, i)
	}
	return t
}
