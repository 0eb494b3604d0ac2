package ckpt

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"resnetlab/fsutil"
	"strings"
	"testing"
)

func sampleTensors() []Tensor {
	return []Tensor{
		{Name: "conv1.weight", DType: DTypeF32, Shape: []int{2, 1, 2, 2},
			F32: []float32{1, -2, 3.5, 1e-30, float32(math.Inf(-1)), 0, -0.125, 7}},
		{Name: "bn1.weight", DType: DTypeF16, Shape: []int{3}, F32: []float32{0.5, -1.25, 65504}},
		{Name: "fc.bias", DType: DTypeBF16, Shape: []int{2}, F32: []float32{1.5, -3}},
		{Name: "bn1.num_batches_tracked", DType: DTypeI64, Shape: []int{}, I64: []int64{-9007199254740993}},
		{Name: "empty", DType: DTypeF32, Shape: []int{0, 3}, F32: []float32{}},
	}
}

func sampleMeta() map[string]any {
	return map[string]any{"epoch": 5, "plugin": "gemini", "precision": "fp16", "lr": 0.001, "ok": true}
}

func writeSample(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "model_5.pth")
	if err := WriteFile(path, "model", sampleMeta(), sampleTensors()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

func TestCheckpointRoundTrip(t *testing.T) {
	path, _ := writeSample(t)
	meta, ts, err := ReadFile(path, "model")
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := map[string]any{"epoch": 5.0, "plugin": "gemini", "precision": "fp16", "lr": 0.001, "ok": true}
	if !reflect.DeepEqual(meta, wantMeta) {
		t.Fatalf("meta %v, want %v", meta, wantMeta)
	}
	want := sampleTensors() // every value is exact in its dtype
	want[3].F32, want[4].F32 = nil, []float32{}
	if !reflect.DeepEqual(ts, want) {
		t.Fatalf("tensors\n got %+v\nwant %+v", ts, want)
	}
	if e, err := MetaInt(meta, "epoch"); err != nil || e != 5 {
		t.Fatalf("MetaInt = %d, %v", e, err)
	}
	if _, err := MetaInt(meta, "lr"); err == nil {
		t.Fatal("MetaInt of 0.001 must fail")
	}
	if s, err := MetaString(meta, "plugin"); err != nil || s != "gemini" {
		t.Fatalf("MetaString = %q, %v", s, err)
	}
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		t.Fatal("the directory was not created")
	}
}

func TestCheckpointNarrowRounding(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pth")
	in := []Tensor{
		{Name: "h", DType: DTypeF16, Shape: []int{2}, F32: []float32{1 + 1.0/4096, 1e6}},
		{Name: "b", DType: DTypeBF16, Shape: []int{1}, F32: []float32{1 + 1.0/256 + 1.0/1024}},
	}
	if err := WriteFile(path, "optimizer", nil, in); err != nil {
		t.Fatal(err)
	}
	meta, ts, err := ReadFile(path, "optimizer")
	if err != nil || len(meta) != 0 {
		t.Fatal(meta, err)
	}
	// 1+2^-12 is below half an f16 ulp (2^-10) above 1: rounds to 1; 1e6
	// overflows f16; 1+2^-8+2^-10 is above the bf16 midpoint 1+2^-8.
	if ts[0].F32[0] != 1 || !math.IsInf(float64(ts[0].F32[1]), 1) || ts[1].F32[0] != 1+1.0/128 {
		t.Fatalf("got %v %v", ts[0].F32, ts[1].F32)
	}
}

// TestCheckpointLayout builds the documented byte layout by hand and
// compares it with what the writer produces.
func TestCheckpointLayout(t *testing.T) {
	le := binary.LittleEndian
	var b []byte
	b = append(b, "RNLBCKPT"...)
	b = le.AppendUint32(b, 2) // format version
	b = le.AppendUint64(b, 0) // total length, patched below
	str := func(s string) { b = le.AppendUint32(b, uint32(len(s))); b = append(b, s...) }
	str("lr_scheduler")
	str(`{"epoch":3}`)
	b = le.AppendUint32(b, 2)
	str("a")
	b = append(b, 1, 1) // f16, ndim 1
	b = le.AppendUint64(b, 2)
	str("n")
	b = append(b, 3, 0) // i64 scalar
	b = le.AppendUint16(b, 0x3c00)
	b = le.AppendUint16(b, 0xc000)
	b = le.AppendUint64(b, uint64(42))
	le.PutUint64(b[12:], uint64(len(b)+32))
	sum := sha256.Sum256(b)
	b = append(b, sum[:]...)

	path := filepath.Join(t.TempDir(), "lr_scheduler_3.pth")
	err := WriteFile(path, "lr_scheduler", map[string]any{"epoch": 3}, []Tensor{
		{Name: "a", DType: DTypeF16, Shape: []int{2}, F32: []float32{1, -2}},
		{Name: "n", DType: DTypeI64, Shape: []int{}, I64: []int64{42}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("layout differs\n got %x\nwant %x", got, b)
	}
}

func TestCheckpointTruncatedEverywhere(t *testing.T) {
	_, full := writeSample(t)
	for n := 0; n < len(full); n++ {
		_, _, err := Decode(full[:n], "model")
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("truncated to %d bytes: got %v, want a truncation error", n, err)
		}
		if !strings.Contains(err.Error(), "while reading") || !strings.Contains(err.Error(), "byte") {
			t.Fatalf("truncated to %d: message does not say where: %v", n, err)
		}
	}
	header, _, _ := encodeHeader("model", sampleMeta(), sampleTensors())
	cut := len(header) + 10 // inside the first tensor's 32 data bytes
	_, _, err := Decode(full[:cut], "")
	want := fmt.Sprintf("truncated: file ends at byte %d while reading the data of tensor \"conv1.weight\" "+
		"(shape [2 1 2 2], f32) (32 bytes needed from byte %d, 10 left); the header declares %d bytes",
		cut, len(header), len(full))
	if err == nil || err.Error() != want {
		t.Fatalf("message: %v", err)
	}
}

func TestCheckpointByteFlips(t *testing.T) {
	_, full := writeSample(t)
	for i := range full {
		b := append([]byte(nil), full...)
		b[i] ^= 0x10
		_, _, err := Decode(b, "model")
		var want error
		switch {
		case i < 8:
			want = ErrMagic
		case i < 12:
			want = ErrVersion
		case i < 20: // the length field: the file no longer matches it
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d (length field): %v", i, err)
			}
			continue
		default:
			want = ErrChecksum
		}
		if !errors.Is(err, want) {
			t.Fatalf("flip at byte %d: got %v, want %v", i, err, want)
		}
	}
}

func TestCheckpointOtherErrors(t *testing.T) {
	path, full := writeSample(t)
	if _, _, err := ReadFile(path, "optimizer"); !errors.Is(err, ErrKind) ||
		!strings.Contains(err.Error(), `holds "model", want "optimizer"`) || !strings.Contains(err.Error(), path) {
		t.Fatalf("wrong kind: %v", err)
	}
	bad := append([]byte("PK\x03\x04pytorch"), full[12:]...)
	if _, _, err := Decode(bad, ""); !errors.Is(err, ErrMagic) {
		t.Fatalf("bad magic: %v", err)
	}
	v2 := append([]byte(nil), full...)
	binary.LittleEndian.PutUint32(v2[8:], 3)
	if _, _, err := Decode(v2, ""); !errors.Is(err, ErrVersion) ||
		!strings.Contains(err.Error(), "unsupported format version 3 (this build reads versions 1 to 2)") {
		t.Fatalf("version: %v", err)
	}
	if _, _, err := Decode(append(full, 0), ""); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "model_1.pth")
	if _, _, err := ReadFile(missing, "model"); !errors.Is(err, fs.ErrNotExist) ||
		!strings.Contains(err.Error(), missing+": file not found") {
		t.Fatalf("missing: %v", err)
	}
}

func TestCheckpointWriteValidation(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]Tensor{
		"appears twice":   {{Name: "a", DType: DTypeF32, Shape: []int{1}, F32: []float32{1}}, {Name: "a", DType: DTypeF32, Shape: []int{1}, F32: []float32{1}}},
		"needs 6 f32":     {{Name: "a", DType: DTypeF32, Shape: []int{2, 3}, F32: []float32{1}}},
		"unknown dtype":   {{Name: "a", DType: "fp32", Shape: []int{1}, F32: []float32{1}}},
		"tensor name":     {{Name: "", DType: DTypeF32, Shape: []int{1}, F32: []float32{1}}},
		"bad dimension":   {{Name: "a", DType: DTypeF32, Shape: []int{-1}}},
		"needs 1 i64":     {{Name: "a", DType: DTypeI64, Shape: []int{1}, F32: []float32{1}}},
		"has 9 dims (at ": {{Name: "a", DType: DTypeF32, Shape: []int{1, 1, 1, 1, 1, 1, 1, 1, 1}, F32: []float32{1}}},
	}
	for frag, ts := range cases {
		err := WriteFile(filepath.Join(dir, "m.pth"), "model", nil, ts)
		if err == nil || !strings.Contains(err.Error(), frag) {
			t.Errorf("want error containing %q, got %v", frag, err)
		}
	}
	if err := WriteFile(filepath.Join(dir, "m.pth"), "model", map[string]any{"x": math.NaN()}, nil); err == nil {
		t.Error("NaN metadata must be rejected")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed writes left files: %v", entries)
	}
}

func TestAtomicWriteKeepsOldFile(t *testing.T) {
	path, full := writeSample(t)
	boom := errors.New("disk on fire")
	err := fsutil.WriteFileAtomic(path, func(w io.Writer) error {
		w.Write(make([]byte, 3<<20)) // more than the buffer: reaches the temp file
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if got, _ := os.ReadFile(path); !reflect.DeepEqual(got, full) {
		t.Fatal("the old file changed")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	// Invalid tensors fail before anything is written.
	bad := []Tensor{{Name: "a", DType: DTypeF32, Shape: []int{2}}}
	if err := WriteFile(path, "model", nil, bad); err == nil {
		t.Fatal("want an error")
	}
	if _, _, err := ReadFile(path, "model"); err != nil {
		t.Fatalf("old checkpoint no longer reads: %v", err)
	}
}

func TestAtomicWriteReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	path, full := writeSample(t)
	dir := filepath.Dir(path)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	err := WriteFile(path, "model", nil, nil)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("want an error naming the file, got %v", err)
	}
	if got, _ := os.ReadFile(path); !reflect.DeepEqual(got, full) {
		t.Fatal("the old file changed")
	}
}

func TestCheckpointPathsAndList(t *testing.T) {
	dir := t.TempDir()
	m, o, s := Paths(dir, 80)
	if m != filepath.Join(dir, "model_80.pth") || o != filepath.Join(dir, "optimizer_80.pth") ||
		s != filepath.Join(dir, "lr_scheduler_80.pth") {
		t.Fatalf("paths %s %s %s", m, o, s)
	}
	touch := func(names ...string) {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range []int{15, 5, 100} {
		a, b, c := Paths("", e)
		touch(a, b, c)
	}
	touch("model_10.pth", "optimizer_10.pth", "model_05.pth", "optimizer_05.pth", "lr_scheduler_05.pth",
		"model_20.pth.tmp-123", "model_x.pth")
	os.Mkdir(filepath.Join(dir, "model_30.pth"), 0o755)
	got, err := List(dir)
	if err != nil || !reflect.DeepEqual(got, []int{5, 15, 100}) {
		t.Fatalf("List = %v, %v", got, err)
	}
	if _, err := List(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing dir: %v", err)
	}
}

func TestReadCheckpointMeta(t *testing.T) {
	path, full := writeSample(t)
	kind, meta, err := ReadMeta(path)
	if err != nil || kind != "model" || meta["plugin"] != "gemini" || meta["epoch"] != 5.0 {
		t.Fatalf("got %q %v %v", kind, meta, err)
	}
	// The header alone is enough: a file cut after the metadata still lists.
	header, _, _ := encodeHeader("model", sampleMeta(), sampleTensors())
	cutAt := len(header) - tensorTableLen(sampleTensors()) - 4
	for _, n := range []int{0, 10, 23, 30, cutAt - 1} {
		os.WriteFile(path, full[:n], 0o644)
		if _, _, err := ReadMeta(path); !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	os.WriteFile(path, full[:cutAt], 0o644)
	if _, _, err := ReadMeta(path); err != nil {
		t.Fatalf("cut after the metadata: %v", err)
	}
	os.WriteFile(path, []byte("PK\x03\x04 a zip file, as torch.save writes"), 0o644)
	if _, _, err := ReadMeta(path); !errors.Is(err, ErrMagic) {
		t.Fatalf("zip: %v", err)
	}
	if _, _, err := ReadMeta(path + ".none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
