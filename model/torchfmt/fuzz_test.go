package torchfmt

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzSeeds are small valid files; testdata/fuzz holds them (and corrupt variants)
// as corpus files, regenerated with TORCHFMT_WRITE_CORPUS=1.
func fuzzSeedTensors() []Tensor {
	return []Tensor{
		{Name: "w", DType: F32, Shape: []int{2, 2}, F32: []float32{1, -2, 0.5, 3}},
		{Name: "h", DType: F16, Shape: []int{3}, F32: []float32{1, 65504, -0.25}},
		{Name: "b", DType: BF16, Shape: []int{1}, F32: []float32{2}},
		{Name: "n", DType: I64, Shape: []int{}, I64: []int64{12}},
	}
}

// checkReread asserts that what a reader accepted survives a write and re-read.
func checkReread(t *testing.T, ts []Tensor, write func([]Tensor) ([]byte, error), read func([]byte) ([]Tensor, error)) {
	if validateAll(ts) != nil {
		return // e.g. an empty key: readable but not writable by design
	}
	data, err := write(ts)
	if err != nil {
		t.Fatalf("re-writing accepted tensors: %v", err)
	}
	again, err := read(data)
	if err != nil {
		t.Fatalf("re-reading: %v", err)
	}
	if d := diffTensors(again, ts); d != "" {
		t.Fatalf("re-read differs: %s", d)
	}
}

func FuzzReadSafetensors(f *testing.F) {
	var buf bytes.Buffer
	WriteSafetensors(&buf, fuzzSeedTensors(), map[string]string{"a": "b"})
	f.Add(buf.Bytes())
	read := func(b []byte) ([]Tensor, error) {
		ts, _, err := ReadSafetensors(bytes.NewReader(b), int64(len(b)))
		return ts, err
	}
	write := func(ts []Tensor) ([]byte, error) {
		var b bytes.Buffer
		err := WriteSafetensors(&b, ts, nil)
		return b.Bytes(), err
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := read(data)
		if err == nil {
			checkReread(t, ts, write, read)
		}
	})
}

func FuzzReadPth(f *testing.F) {
	var buf bytes.Buffer
	WritePth(&buf, fuzzSeedTensors())
	f.Add(buf.Bytes())
	write := func(ts []Tensor) ([]byte, error) {
		var b bytes.Buffer
		err := WritePth(&b, ts)
		return b.Bytes(), err
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := readPthBytes(data)
		if err == nil {
			checkReread(t, ts, write, readPthBytes)
		}
	})
}

// TestWriteFuzzCorpus regenerates testdata/fuzz when TORCHFMT_WRITE_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("TORCHFMT_WRITE_CORPUS") == "" {
		t.Skip("set TORCHFMT_WRITE_CORPUS=1 to regenerate testdata/fuzz")
	}
	var st, pth bytes.Buffer
	WriteSafetensors(&st, fuzzSeedTensors(), map[string]string{"a": "b"})
	WritePth(&pth, fuzzSeedTensors()[:2])
	rng := rand.New(rand.NewPCG(19, 20))
	for name, data := range map[string][]byte{"FuzzReadSafetensors": st.Bytes(), "FuzzReadPth": pth.Bytes()} {
		dir := filepath.Join("testdata", "fuzz", name)
		os.MkdirAll(dir, 0o755)
		seeds := [][]byte{data, data[:len(data)*2/3]}
		if name == "FuzzReadPth" { // a real torch.save file: views, shared storages, BUILD
			real, err := os.ReadFile("testdata/torch/torch_small.pth")
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, real)
		}
		for range 3 {
			b := bytes.Clone(data)
			b[rng.IntN(len(b))] ^= 0xff
			seeds = append(seeds, b)
		}
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// FuzzPthMetadataRecord wraps fuzzed bytes as the metadata record of an
// otherwise valid .pth archive: the reader returns a map of strings or an
// error naming the record, never a panic, and a map it returns re-encodes
// to an archive that reads back to the same map.
func FuzzPthMetadataRecord(f *testing.F) {
	for _, s := range []string{`{"dataset":"synthetic","synthetic_test":"40"}`, `{}`, `null`, `[1]`,
		`{"a":1}`, `{"a":"\u0000"}`, `{"a":"b","a":"c"}`, ``} {
		f.Add([]byte(s))
	}
	ts := fuzzSeedTensors()[:2]
	f.Fuzz(func(t *testing.T, record []byte) {
		var buf bytes.Buffer
		if err := writePthRecord(&buf, ts, "archive", record); err != nil {
			t.Fatal(err)
		}
		_, md, err := ReadPthMeta(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			if !strings.Contains(err.Error(), MetadataRecord) {
				t.Fatalf("error does not name the record: %v", err)
			}
			return
		}
		var again bytes.Buffer
		if err := WritePthMeta(&again, ts, md); err != nil {
			t.Fatal(err)
		}
		_, md2, err := ReadPthMeta(bytes.NewReader(again.Bytes()), int64(again.Len()))
		if err != nil || !maps.Equal(md, md2) {
			t.Fatalf("re-read metadata %v (%v), want %v", md2, err, md)
		}
	})
}
