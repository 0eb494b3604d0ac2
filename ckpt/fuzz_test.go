package ckpt

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// FuzzReadCheckpoint feeds arbitrary bytes to the decoder, both as they are
// (almost always stopped by the length or checksum checks, but a declared
// length beyond the end walks the whole structure unverified) and with the
// length field and checksum fixed up so the verified parser sees them too.
// The decoder must never panic and never return values its input could not
// hold. The seed corpus is in testdata/fuzz/FuzzReadCheckpoint.
func FuzzReadCheckpoint(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
		if len(b) >= 20 {
			checkDecode(t, fixUp(b))
		}
	})
}

func checkDecode(t *testing.T, b []byte) {
	meta, ts, err := Decode(b, "")
	if err != nil {
		if meta != nil || ts != nil {
			t.Fatalf("values returned with error %v", err)
		}
		return
	}
	var bytes int
	for _, x := range ts {
		n := len(x.F32) + len(x.I64)
		if n != x.Numel() {
			t.Fatalf("tensor %q: %d values for shape %v", x.Name, n, x.Shape)
		}
		bytes += n
	}
	if bytes > len(b) {
		t.Fatalf("%d values decoded from %d bytes", bytes, len(b))
	}
}

// fixUp sets the length field and appends a valid checksum.
func fixUp(b []byte) []byte {
	out := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(out[12:], uint64(len(out)+32))
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// fuzzSeeds returns a few interesting inputs: a valid file, a truncated
// one, a file with an absurd tensor count and one with absurd dims.
func fuzzSeeds(tb testing.TB) [][]byte {
	path := filepath.Join(tb.TempDir(), "m.pth")
	if err := WriteFile(path, "model", sampleMeta(), sampleTensors()); err != nil {
		tb.Fatal(err)
	}
	valid, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	header, _, _ := encodeHeader("model", sampleMeta(), sampleTensors())
	countAt := len(header) - tensorTableLen(sampleTensors()) - 4
	hugeCount := append([]byte(nil), valid...)
	binary.LittleEndian.PutUint32(hugeCount[countAt:], 0xffffffff)
	hugeDims := append([]byte(nil), valid...)
	dimAt := countAt + 4 + 4 + len("conv1.weight") + 2
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint64(hugeDims[dimAt+8*i:], 1<<31-1)
	}
	return [][]byte{valid, valid[:len(valid)/2], hugeCount[:len(hugeCount)-32], hugeDims[:len(hugeDims)-32], {}}
}

// tensorTableLen is the size of the tensor table entries of ts.
func tensorTableLen(ts []Tensor) int {
	n := 0
	for _, t := range ts {
		n += 4 + len(t.Name) + 2 + 8*len(t.Shape)
	}
	return n
}

// TestFuzzCorpusUpToDate checks the committed seed corpus decodes as
// described (it is regenerated with RNL_WRITE_FUZZ_CORPUS=1).
func TestFuzzCorpusUpToDate(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadCheckpoint")
	seeds := fuzzSeeds(t)
	names := []string{"valid", "truncated", "huge_count", "huge_dims", "empty"}
	if os.Getenv("RNL_WRITE_FUZZ_CORPUS") != "" {
		os.MkdirAll(dir, 0o755)
		for i, s := range seeds {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, names[i]), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("seed corpus file missing: %v", err)
		}
	}
	if _, _, err := Decode(seeds[0], "model"); err != nil {
		t.Fatalf("valid seed: %v", err)
	}
	for i, s := range seeds[1:] {
		if _, _, err := Decode(s, ""); err == nil {
			t.Errorf("seed %s decoded without error", names[i+1])
		}
		if len(s) < 20 {
			continue
		}
		if _, _, err := Decode(fixUp(s), ""); err == nil {
			t.Errorf("seed %s with a valid checksum decoded without error", names[i+1])
		}
	}
}
