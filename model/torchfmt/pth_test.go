package torchfmt

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

func writePthBytes(t *testing.T, ts []Tensor) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePth(&buf, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readPthBytes(data []byte) ([]Tensor, error) {
	return ReadPth(bytes.NewReader(data), int64(len(data)))
}

func TestPthRoundTrip(t *testing.T) {
	want := sampleTensors(rand.New(rand.NewPCG(9, 10)))
	got, err := readPthBytes(writePthBytes(t, want))
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTensors(got, want); d != "" {
		t.Fatal(d)
	}
}

// TestPthManyTensors crosses the 1000-item SETITEMS batch and 256 memo slots.
func TestPthManyTensors(t *testing.T) {
	var want []Tensor
	for i := range 1001 {
		want = append(want, Tensor{Name: fmt.Sprintf("t%d", i), DType: I64, Shape: []int{1}, I64: []int64{int64(i)}})
	}
	got, err := readPthBytes(writePthBytes(t, want))
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTensors(got, want); d != "" {
		t.Fatal(d)
	}
}

// TestPthLayout checks the archive with archive/zip: entry names and order as
// torch writes them, stored entries, 64-byte aligned data, header records.
func TestPthLayout(t *testing.T) {
	ts := sampleTensors(rand.New(rand.NewPCG(11, 12)))
	data := writePthBytes(t, ts)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"archive/data.pkl", "archive/byteorder"}
	for i := range ts {
		want = append(want, fmt.Sprintf("archive/data/%d", i))
	}
	want = append(want, "archive/version")
	if len(zr.File) != len(want) {
		t.Fatalf("%d entries, want %d", len(zr.File), len(want))
	}
	for i, f := range zr.File {
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		if f.Name != want[i] || f.Method != zip.Store || off%64 != 0 {
			t.Errorf("entry %d: %s method %d data at %d; want %s stored at a multiple of 64", i, f.Name, f.Method, off, want[i])
		}
		body := readEntry(t, f)
		switch f.Name {
		case "archive/byteorder":
			if string(body) != "little" {
				t.Errorf("byteorder %q", body)
			}
		case "archive/version":
			if string(body) != "3\n" {
				t.Errorf("version %q", body)
			}
		case "archive/data/0":
			if len(body) != 4*ts[0].Numel() {
				t.Errorf("storage 0 has %d bytes, want %d", len(body), 4*ts[0].Numel())
			}
		}
	}
}

func readEntry(t *testing.T, f *zip.File) []byte {
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// zipEntry is one record of a hand-built archive.
type zipEntry struct {
	name    string
	data    []byte
	deflate bool
}

func buildZip(t *testing.T, entries []zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		m := zip.Store
		if e.deflate {
			m = zip.Deflate
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(e.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// viewArchive holds one 4x6 float32 storage (values 0..23) viewed several ways,
// plus a one-element storage expanded with stride 0, as torch.save writes views.
func viewArchive(t *testing.T) []byte {
	p := &pickler{memo: map[string]int{}}
	p.buf = append(p.buf, opProto, 2)
	p.newOrderedDict()
	p.buf = append(p.buf, opMark)
	tensor := func(storage, numel, offset int, size, stride []int) {
		p.global("torch._utils", "_rebuild_tensor_v2")
		p.buf = append(p.buf, opMark, opMark)
		p.str("storage")
		p.global("torch", "FloatStorage")
		p.str(fmt.Sprint(storage))
		p.str("cuda:0")
		p.int(int64(numel))
		p.buf = append(p.buf, opTuple, opBinPersID)
		p.int(int64(offset))
		p.intTuple(size)
		p.intTuple(stride)
		p.buf = append(p.buf, opNewFalse)
		p.newOrderedDict()
		p.buf = append(p.buf, opTuple, opReduce)
	}
	view := func(name string, storage, numel, offset int, size, stride []int) {
		p.str(name)
		tensor(storage, numel, offset, size, stride)
	}
	view("base", 0, 24, 0, []int{4, 6}, []int{6, 1})
	view("transposed", 0, 24, 0, []int{6, 4}, []int{1, 6})
	view("rows", 0, 24, 6, []int{2, 6}, []int{6, 1})
	view("every_other", 0, 24, 1, []int{4, 3}, []int{6, 2})
	view("expanded", 1, 1, 0, []int{3, 4}, []int{0, 0})
	// A parameter wraps a tensor: _rebuild_parameter(tensor, True, OrderedDict()).
	p.str("param")
	p.global("torch._utils", "_rebuild_parameter")
	p.buf = append(p.buf, opMark)
	tensor(0, 24, 23, []int{1}, []int{1})
	p.buf = append(p.buf, opNewTrue)
	p.newOrderedDict()
	p.buf = append(p.buf, opTuple, opReduce, opSetItems, opStop)
	base := make([]float32, 24)
	for i := range base {
		base[i] = float32(i)
	}
	return buildZip(t, []zipEntry{
		{name: "model/data.pkl", data: p.buf},
		{name: "model/data/0", data: appendLE(nil, Tensor{DType: F32, F32: base})},
		{name: "model/data/1", data: appendLE(nil, Tensor{DType: F32, F32: []float32{-1}})},
		{name: "model/version", data: []byte("3\n")},
	})
}

// TestPthViews reads strided, offset, shared and expanded views and a parameter,
// comparing with values indexed by hand from the 0..23 storage.
func TestPthViews(t *testing.T) {
	got, err := readPthBytes(viewArchive(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := func(rows, cols int, at func(i, j int) float32) []float32 {
		var out []float32
		for i := range rows {
			for j := range cols {
				out = append(out, at(i, j))
			}
		}
		return out
	}
	want := []Tensor{
		{Name: "base", DType: F32, Shape: []int{4, 6}, F32: ref(4, 6, func(i, j int) float32 { return float32(6*i + j) })},
		{Name: "transposed", DType: F32, Shape: []int{6, 4}, F32: ref(6, 4, func(i, j int) float32 { return float32(6*j + i) })},
		{Name: "rows", DType: F32, Shape: []int{2, 6}, F32: ref(2, 6, func(i, j int) float32 { return float32(6 + 6*i + j) })},
		{Name: "every_other", DType: F32, Shape: []int{4, 3}, F32: ref(4, 3, func(i, j int) float32 { return float32(1 + 6*i + 2*j) })},
		{Name: "expanded", DType: F32, Shape: []int{3, 4}, F32: ref(3, 4, func(i, j int) float32 { return -1 })},
		{Name: "param", DType: F32, Shape: []int{1}, F32: []float32{23}},
	}
	if d := diffTensors(got, want); d != "" {
		t.Fatal(d)
	}
}

// pthWith returns a valid archive whose data.pkl is replaced, or whose entries are
// edited by the given function.
func pthEntries(t *testing.T) []zipEntry {
	ts := []Tensor{{Name: "w", DType: F32, Shape: []int{2}, F32: []float32{1, 2}}}
	data := writePthBytes(t, ts)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var es []zipEntry
	for _, f := range zr.File {
		es = append(es, zipEntry{name: f.Name, data: readEntry(t, f)})
	}
	return es
}

func edit(t *testing.T, fn func([]zipEntry) []zipEntry) []byte {
	return buildZip(t, fn(pthEntries(t)))
}

func without(name string) func([]zipEntry) []zipEntry {
	return func(es []zipEntry) []zipEntry {
		var out []zipEntry
		for _, e := range es {
			if e.name != name {
				out = append(out, e)
			}
		}
		return out
	}
}

func replace(name string, data []byte, deflate bool) func([]zipEntry) []zipEntry {
	return func(es []zipEntry) []zipEntry {
		for i := range es {
			if es[i].name == name {
				es[i] = zipEntry{name: name, data: data, deflate: deflate}
			}
		}
		return es
	}
}

// pkl wraps pickle opcodes after PROTO 2 and before STOP.
func pkl(body string) []byte { return []byte("\x80\x02" + body + ".") }

func TestPthRejectsCorruptInput(t *testing.T) {
	valid := writePthBytes(t, []Tensor{{Name: "w", DType: F32, Shape: []int{2}, F32: []float32{1, 2}}})
	persid := "(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x02tQ"
	tensor := "ctorch._utils\n_rebuild_tensor_v2\n(" + persid + "K\x00K\x02\x85K\x01\x85\x89}tR"
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"not a zip", "not a readable zip", []byte("hello world, definitely not a zip")},
		{"truncated", "pth: truncated: ", valid[:len(valid)/2]},
		{"cut in the central directory", "no complete zip end record after its central directory", valid[:len(valid)-30]},
		{"damaged, not cut", "not a readable zip", emptyEntryThen("a/x", "neither an entry nor a central directory")},
		{"missing data.pkl", "archive/data.pkl is missing", edit(t, without("archive/data.pkl"))},
		{"missing storage", "archive/data/0 is missing", edit(t, without("archive/data/0"))},
		{"missing version", "archive/version is missing", edit(t, without("archive/version"))},
		{"bad version", "want a decimal format version", edit(t, replace("archive/version", []byte("three"), false))},
		{"big endian", "only little-endian", edit(t, replace("archive/byteorder", []byte("big"), false))},
		{"short storage", "archive/data/0 has 4 bytes, but the pickle declares 2 F32 elements (8 bytes)", edit(t, replace("archive/data/0", make([]byte, 4), false))},
		{"compressed", "is compressed", edit(t, replace("archive/data.pkl", pkl("}"), true))},
		{"unknown global", "global subprocess.call is not allowed", edit(t, replace("archive/data.pkl", pkl("csubprocess\ncall\n)R"), false))},
		{"not a dict", "is a list, want a state dict", edit(t, replace("archive/data.pkl", pkl("]"), false))},
		{"value not tensor", `entry "a" is a int, want a tensor`, edit(t, replace("archive/data.pkl", pkl("}X\x01\x00\x00\x00aK\x01s"), false))},
		{"int key", "key #0 is a int, want str", edit(t, replace("archive/data.pkl", pkl("}K\x01"+tensor+"s"), false))},
		{"view past storage", `tensor "a": view (offset 0, size [3], stride [1]) runs past storage 0 of 2 elements`,
			edit(t, replace("archive/data.pkl", pkl("}X\x01\x00\x00\x00a"+strings.Replace(tensor, "K\x02\x85", "K\x03\x85", 1)+"s"), false))},
		{"bad persistent id", "persistent id must be", edit(t, replace("archive/data.pkl", pkl("X\x01\x00\x00\x00x\x85Q"), false))},
		{"unsupported storage", "global torch.DoubleStorage is not allowed", edit(t, replace("archive/data.pkl", pkl(strings.Replace(persid, "FloatStorage", "DoubleStorage", 1)), false))},
		{"escaping storage key", "is not a plain record name", edit(t, replace("archive/data.pkl", pkl(strings.Replace(persid, "X\x01\x00\x00\x000", "X\x02\x00\x00\x00..", 1)), false))},
		{"no folder", "not inside an archive folder", buildZip(t, []zipEntry{{name: "data.pkl", data: pkl("}")}})},
		{"empty zip", "no entries", buildZip(t, nil)},
	}
	for _, c := range cases {
		_, err := readPthBytes(c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// emptyEntryThen is a zip local header of an empty stored entry name,
// then rest: a file that was damaged, not cut short.
func emptyEntryThen(name, rest string) []byte {
	h := make([]byte, localHeaderLen)
	copy(h, "PK\x03\x04")
	h[26] = byte(len(name))
	return append(append(h, name...), rest...)
}

// TestPthTruncationNeverPanics cuts a valid archive at many points and flips bytes.
func TestPthTruncationNeverPanics(t *testing.T) {
	valid := writePthBytes(t, sampleTensors(rand.New(rand.NewPCG(13, 14))))
	for n := 0; n < len(valid); n += 37 {
		if _, err := readPthBytes(valid[:n]); err == nil {
			t.Fatalf("archive cut to %d of %d bytes was accepted", n, len(valid))
		}
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for range 300 {
		b := bytes.Clone(valid)
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		readPthBytes(b) // may succeed (a flipped value byte is undetectable) but must not panic
	}
}

// Every entry carries a valid DOS date, 1980-01-01, not month 0 day 0, and
// the metadata record round-trips.
func TestPthEntryDateAndMetadata(t *testing.T) {
	var buf bytes.Buffer
	if err := WritePthMeta(&buf, fuzzSeedTensors(), map[string]string{"dataset": "synthetic"}); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if y, m, d := f.Modified.Date(); y != 1980 || m != 1 || d != 1 {
			t.Fatalf("entry %s dated %d-%02d-%02d, want 1980-01-01", f.Name, y, m, d)
		}
	}
	_, md, err := ReadPthMeta(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil || md["dataset"] != "synthetic" {
		t.Fatalf("metadata %v (%v), want dataset synthetic", md, err)
	}
}
