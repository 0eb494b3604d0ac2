package torchfmt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func writeST(t *testing.T, ts []Tensor, meta map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, ts, meta); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSafetensorsRoundTrip(t *testing.T) {
	want := sampleTensors(rand.New(rand.NewPCG(5, 6)))
	meta := map[string]string{"format": "pt", "epoch": "5"}
	data := writeST(t, want, meta)
	got, gotMeta, err := ReadSafetensors(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTensors(got, want); d != "" {
		t.Fatal(d)
	}
	if len(gotMeta) != 2 || gotMeta["format"] != "pt" || gotMeta["epoch"] != "5" {
		t.Fatalf("metadata %v, want %v", gotMeta, meta)
	}
}

// TestSafetensorsLayout decodes the written bytes with encoding/json and plain
// arithmetic, independently of the reader.
func TestSafetensorsLayout(t *testing.T) {
	ts := []Tensor{
		{Name: "a", DType: F32, Shape: []int{2}, F32: []float32{1, -2}},
		{Name: "b", DType: BF16, Shape: []int{1}, F32: []float32{1}},
		{Name: "n", DType: I64, Shape: []int{}, I64: []int64{-3}},
	}
	data := writeST(t, ts, map[string]string{"k": "v"})
	n := binary.LittleEndian.Uint64(data)
	if (8+n)%8 != 0 {
		t.Errorf("data starts at %d, not a multiple of 8", 8+n)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"__metadata__": `{"k":"v"}`,
		"a":            `{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`,
		"b":            `{"dtype":"BF16","shape":[1],"data_offsets":[8,10]}`,
		"n":            `{"dtype":"I64","shape":[],"data_offsets":[10,18]}`,
	}
	for k, v := range want {
		if string(header[k]) != v {
			t.Errorf("header[%q] = %s, want %s", k, header[k], v)
		}
	}
	body := data[8+n:]
	wantBody := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0x80, 0x3f, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if !bytes.Equal(body, wantBody) {
		t.Errorf("data % x, want % x", body, wantBody)
	}
}

// stFile builds a safetensors file from a literal header and data, for corruption tests.
func stFile(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), data...)
}

func TestSafetensorsRejectsCorruptInput(t *testing.T) {
	valid := writeST(t, sampleTensors(rand.New(rand.NewPCG(7, 8))), nil)
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"empty", "too short", nil},
		{"truncated data", fmt.Sprintf("truncated: the header says the file is %d bytes, it has %d", len(valid), len(valid)-1), valid[:len(valid)-1]},
		{"truncated header", "truncated: the header length says the header runs to byte", valid[:20]},
		{"huge header length", "exceeds", append(binary.LittleEndian.AppendUint64(nil, 1<<62), valid[8:]...)},
		{"not json", "does not start with '{'", stFile("[1,2]   ", nil)},
		{"bad json", "bad header", stFile(`{"a":{"dtype":"F32",}}`, nil)},
		{"trailing garbage", "unexpected bytes", stFile(`{}x`, nil)},
		{"missing field", `tensor "a": header entry needs`, stFile(`{"a":{"dtype":"F32","shape":[1]}}`, make([]byte, 4))},
		{"wrong dtype", `tensor "a": dtype "F64" not supported`, stFile(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8))},
		{"negative dim", `tensor "a": dim 0 is -1`, stFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, make([]byte, 4))},
		{"size mismatch", `tensor "a": data_offsets [0, 4] span 4 bytes, but F32 shape [2] needs 8`, stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4))},
		{"reversed offsets", `tensor "a": data_offsets [4, 0]`, stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}`, make([]byte, 4))},
		{"offset past end", `truncated: the header says the file is 70 bytes, it has 66 (cut in tensor "a")`, stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 4))},
		{"overlap", `tensor "b": data_offsets [0, 4] overlap tensor "a"`, stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8))},
		{"gap", `tensor "a": data_offsets start at 4, leaving a gap`, stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8))},
		{"leftover bytes", "cover 4 bytes but the data buffer holds 8", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8))},
		{"duplicate key", `key "a" appears twice`, stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8))},
		{"bad metadata", "__metadata__ must map strings to strings", stFile(`{"__metadata__":{"x":1}}`, nil)},
		{"entry not object", `tensor "a": bad header entry`, stFile(`{"a":5}`, nil)},
		{"overflowing shape", `tensor "a": shape`, stFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil)},
	}
	for _, c := range cases {
		_, _, err := ReadSafetensors(bytes.NewReader(c.data), int64(len(c.data)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestSafetensorsEmptyTensorsAnywhere(t *testing.T) {
	// Zero-size tensors may share an offset with the next tensor, in any header order.
	data := stFile(`{"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"e":{"dtype":"I64","shape":[0],"data_offsets":[0,0]}}`, []byte{0, 0, 0x80, 0x3f})
	ts, _, err := ReadSafetensors(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].F32[0] != 1 || ts[1].Name != "e" || len(ts[1].I64) != 0 {
		t.Fatalf("got %+v", ts)
	}
}

func TestWriteSafetensorsRejectsBadTensors(t *testing.T) {
	cases := []struct {
		ts   []Tensor
		want string
	}{
		{[]Tensor{{Name: "a", DType: F32, Shape: []int{2}, F32: []float32{1}}}, `tensor "a": F32 shape [2] needs 2 values`},
		{[]Tensor{{Name: "a", DType: "F64", Shape: []int{1}}}, `dtype "F64" not supported`},
		{[]Tensor{{Name: "a", DType: I64, Shape: []int{1}, F32: []float32{1}}}, "needs 1 values in I64"},
		{[]Tensor{{Name: "a", DType: F32, F32: []float32{1}}, {Name: "a", DType: F32, F32: []float32{1}}}, `"a" appears twice`},
		{[]Tensor{{Name: "__metadata__", DType: F32, F32: []float32{1}}}, "reserved"},
		{[]Tensor{{DType: F32, F32: []float32{1}}}, "empty name"},
	}
	for _, c := range cases {
		err := WriteSafetensors(&bytes.Buffer{}, c.ts, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one containing %q", err, c.want)
		}
	}
}
