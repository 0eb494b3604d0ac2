package torchfmt

import "fmt"

// rebuildTensor checks the arguments of torch._utils._rebuild_tensor_v2(storage,
// storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) and
// returns the view they describe; the data is read later from the archive.
func rebuildTensor(args pyTuple) (*pyTensor, error) {
	if len(args) != 6 && len(args) != 7 {
		return nil, fmt.Errorf("_rebuild_tensor_v2 called with %d arguments, want 6 or 7", len(args))
	}
	st, ok := args[0].(*pyStorage)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2: storage argument is %s, want a storage", typeName(args[0]))
	}
	off, ok := args[1].(int64)
	if !ok || off < 0 {
		return nil, fmt.Errorf("_rebuild_tensor_v2: storage_offset must be a non-negative int")
	}
	size, err := intTuple(args[2], "size")
	if err != nil {
		return nil, err
	}
	stride, err := intTuple(args[3], "stride")
	if err != nil {
		return nil, err
	}
	if len(stride) != len(size) {
		return nil, fmt.Errorf("_rebuild_tensor_v2: size has %d dims but stride has %d", len(size), len(stride))
	}
	if _, ok := args[4].(bool); !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2: requires_grad is %s, want bool", typeName(args[4]))
	}
	return &pyTensor{storage: st, offset: off, size: size, stride: stride}, nil
}

// rebuildParameter unwraps torch._utils._rebuild_parameter(data, requires_grad,
// backward_hooks), which torch.save emits for nn.Parameter values.
func rebuildParameter(args pyTuple) (*pyTensor, error) {
	if len(args) != 3 {
		return nil, fmt.Errorf("_rebuild_parameter called with %d arguments, want 3", len(args))
	}
	t, ok := args[0].(*pyTensor)
	if !ok {
		return nil, fmt.Errorf("_rebuild_parameter: data is %s, want a tensor", typeName(args[0]))
	}
	return t, nil
}

// intTuple converts a tuple of non-negative ints (a size or stride).
func intTuple(v any, what string) ([]int64, error) {
	t, ok := v.(pyTuple)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2: %s is %s, want a tuple of ints", what, typeName(v))
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return nil, fmt.Errorf("_rebuild_tensor_v2: %s[%d] must be a non-negative int", what, i)
		}
		out[i] = n
	}
	return out, nil
}

// materialize copies a view out of its storage's raw little-endian bytes. The
// element budget stops a small crafted file (many views of one storage, or stride-0
// expansions) from making us allocate far more than the file holds.
func materialize(name string, v *pyTensor, raw []byte, budget *int64) (Tensor, error) {
	st := v.storage
	shape := make([]int, len(v.size))
	for i, d := range v.size {
		if d > maxElems {
			return Tensor{}, fmt.Errorf("tensor %q: dim %d is %d", name, i, d)
		}
		shape[i] = int(d)
	}
	n, err := numel(shape)
	if err != nil {
		return Tensor{}, fmt.Errorf("tensor %q: %v", name, err)
	}
	if int64(n) > *budget {
		return Tensor{}, fmt.Errorf("tensor %q: %d elements exceed what is left (%d) of the element budget for this file; "+
			"views of shared or expanded storages may hold at most 16 elements per file byte", name, n, *budget)
	}
	*budget -= int64(n)
	if n == 0 {
		return newTensor(name, st.dtype, shape, 0), nil
	}
	if err := checkViewBounds(name, v); err != nil {
		return Tensor{}, err
	}
	if isContiguous(v) {
		start := int(v.offset) * dtypeSize(st.dtype)
		return decodeContiguous(name, st.dtype, shape, n, raw[start:]), nil
	}
	return gatherStrided(name, v, shape, n, raw), nil
}

// checkViewBounds makes sure every element of a non-empty view lies inside its
// storage, subtracting each dim's span from the room left so nothing can overflow.
func checkViewBounds(name string, v *pyTensor) error {
	st := v.storage
	room := st.numel - 1 - v.offset
	if room < 0 {
		return fmt.Errorf("tensor %q: storage_offset %d is outside storage %s of %d elements", name, v.offset, st.key, st.numel)
	}
	for i, d := range v.size {
		if d <= 1 || v.stride[i] == 0 {
			continue
		}
		if d-1 > room/v.stride[i] {
			return fmt.Errorf("tensor %q: view (offset %d, size %v, stride %v) runs past storage %s of %d elements",
				name, v.offset, v.size, v.stride, st.key, st.numel)
		}
		room -= (d - 1) * v.stride[i]
	}
	return nil
}

func isContiguous(v *pyTensor) bool {
	want := int64(1)
	for i := len(v.size) - 1; i >= 0; i-- {
		if v.size[i] != 1 && v.stride[i] != want {
			return false
		}
		want *= v.size[i]
	}
	return true
}

// gatherStrided walks the view in row-major order, keeping a running storage index.
func gatherStrided(name string, v *pyTensor, shape []int, n int, raw []byte) Tensor {
	t := newTensor(name, v.storage.dtype, shape, n)
	idx := make([]int64, len(shape))
	pos := v.offset
	for j := 0; j < n; j++ {
		decodeElem(&t, j, raw, int(pos))
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			pos += v.stride[d]
			if idx[d] < v.size[d] {
				break
			}
			pos -= idx[d] * v.stride[d]
			idx[d] = 0
		}
	}
	return t
}
