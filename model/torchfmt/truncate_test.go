package torchfmt

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A file cut short at any point past its first bytes is reported as
// truncated, in one line naming the file and giving its size.
func TestReadFileSaysTruncated(t *testing.T) {
	dir := t.TempDir()
	ts := sampleTensors(rand.New(rand.NewPCG(31, 32)))
	for _, name := range []string{"w.safetensors", "w.pth"} {
		full := filepath.Join(dir, name)
		if err := WriteFile(full, ts); err != nil {
			t.Fatal(err)
		}
		valid, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		cut := filepath.Join(dir, "cut-"+name)
		cuts := []int{len(valid) - 1, len(valid) - 30}
		for n := 9; n < len(valid); n += 1 + n/16 {
			cuts = append(cuts, n)
		}
		for _, n := range cuts {
			if err := os.WriteFile(cut, valid[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadFile(cut)
			if msg := errText(err); !strings.HasPrefix(msg, cut+": ") || !strings.Contains(msg, "truncated") ||
				!strings.Contains(msg, strconv.Itoa(n)) || strings.Contains(msg, "\n") {
				t.Fatalf("%s cut to %d of %d bytes: error %q, want one line naming the file, 'truncated' and %d",
					name, n, len(valid), msg, n)
			}
		}
	}
}

// The header length of a cut safetensors file is compared with the file's
// size: the message gives both.
func TestSafetensorsTruncatedHeaderSizes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	b := binary.LittleEndian.AppendUint64(nil, 12345)
	b = append(b, `{"a":{"dtype":"F32"`...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	want := path + ": safetensors: truncated: the header length says the header runs to byte 12353, the file has 27 bytes"
	if errText(err) != want {
		t.Fatalf("error %q, want %q", errText(err), want)
	}
}

// Lengths a cut or corrupt file declares are checked against its size
// before anything of that length is allocated.
func TestCutFilesAllocateLittle(t *testing.T) {
	dir := t.TempDir()
	st := binary.LittleEndian.AppendUint64(nil, maxHeaderLen)
	st = append(st, "{}"...)
	zip := emptyEntryThen("a/data.pkl", "")
	binary.LittleEndian.PutUint32(zip[18:], 0xfffffffe) // a 4 GiB entry
	binary.LittleEndian.PutUint16(zip[28:], 0)
	for name, data := range map[string][]byte{"big.safetensors": st, "big.pth": zip} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ReadFile(path)
		runtime.ReadMemStats(&after)
		if !strings.Contains(errText(err), "truncated") {
			t.Errorf("%s: error %q, want 'truncated'", name, errText(err))
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
			t.Errorf("%s: reading a %d-byte file allocated %d bytes", name, len(data), got)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
