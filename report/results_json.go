package report

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
)

// finiteJSON converts v into a value encoding/json marshals exactly like v,
// except that NaN and ±Inf floats become null (encoding/json refuses them,
// and a diverged run must still leave its result file). Struct fields keep
// their order and their json tags (name, "-", omitempty).
func finiteJSON(v any) any { return finiteValue(reflect.ValueOf(v)) }

func finiteValue(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return finiteValue(v.Elem())
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case reflect.Struct:
		return finiteStruct(v)
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = finiteValue(v.Index(i))
		}
		return out
	}
	return v.Interface()
}

func finiteStruct(v reflect.Value) orderedObject {
	var obj orderedObject
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.Contains(opts, "omitempty") && isEmptyJSON(v.Field(i)) {
			continue
		}
		obj = append(obj, keyValue{name, finiteValue(v.Field(i))})
	}
	return obj
}

// isEmptyJSON is encoding/json's notion of empty for omitempty.
func isEmptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map, reflect.Array, reflect.String:
		return v.Len() == 0
	case reflect.Struct:
		return false
	}
	return v.IsZero()
}

type keyValue struct {
	key string
	val any
}

// orderedObject is a JSON object that keeps its keys in insertion order.
type orderedObject []keyValue

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.key)
		val, err := json.Marshal(kv.val)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
