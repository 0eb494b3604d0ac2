package torchfmt

import "fmt"

// Python values as the unpickler builds them. None is nil, bool is bool, int is
// int64, float is float64, str is string and bytes is []byte.
type (
	pyGlobal struct{ full string } // an allowed global, e.g. "torch.FloatStorage"
	pyTuple  []any
	pyList   struct{ items []any }
	pyDict   struct {
		keys, vals []any
		index      map[any]int // position of each key, for Python's overwrite semantics
	}
	// pyStorage is what a storage's persistent id resolves to.
	pyStorage struct {
		key   string
		dtype string
		numel int64
	}
	// pyTensor is a tensor view of a storage, as _rebuild_tensor_v2 describes it.
	pyTensor struct {
		storage      *pyStorage
		offset       int64
		size, stride []int64
	}
)

func newDict() *pyDict { return &pyDict{index: map[any]int{}} }

// set inserts or overwrites, keeping first-insertion order like Python dicts.
func (d *pyDict) set(k, v any) error {
	switch k.(type) {
	case string, int64, bool, float64, nil:
	default:
		return fmt.Errorf("dict key of type %s not supported", typeName(k))
	}
	if i, ok := d.index[k]; ok {
		d.vals[i] = v
		return nil
	}
	d.index[k] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

// typeName names a value's Python type for error messages. It never formats the
// value itself: pickles can build cyclic lists and dicts.
func typeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case pyTuple:
		return "tuple"
	case *pyList:
		return "list"
	case *pyDict:
		return "dict"
	case pyGlobal:
		return v.full
	case *pyStorage:
		return "storage"
	case *pyTensor:
		return "tensor"
	}
	return fmt.Sprintf("%T", v)
}
