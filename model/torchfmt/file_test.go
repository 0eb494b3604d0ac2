package torchfmt

import (
	"archive/zip"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReadFileBothFormats(t *testing.T) {
	dir := t.TempDir()
	want := sampleTensors(rand.New(rand.NewPCG(21, 22)))
	for _, name := range []string{"model_5.pth", "weights.safetensors", "noext"} {
		path := filepath.Join(dir, name)
		if err := WriteFile(path, want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffTensors(got, want); d != "" {
			t.Fatalf("%s: %s", name, d)
		}
	}
	// torch names the archive folder after the file; check we do too.
	zr, err := zip.OpenReader(filepath.Join(dir, "model_5.pth"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if zr.File[0].Name != "model_5/data.pkl" {
		t.Errorf("first entry %q, want model_5/data.pkl", zr.File[0].Name)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestWriteFileFailureKeepsOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.pth")
	good := []Tensor{{Name: "a", DType: F32, Shape: []int{1}, F32: []float32{1}}}
	if err := WriteFile(path, good); err != nil {
		t.Fatal(err)
	}
	bad := []Tensor{{Name: "a", DType: F32, Shape: []int{2}, F32: []float32{1}}}
	if err := WriteFile(path, bad); err == nil || !strings.Contains(err.Error(), `tensor "a"`) {
		t.Fatalf("error %v", err)
	}
	got, err := ReadFile(path)
	if err != nil || diffTensors(got, good) != "" {
		t.Fatalf("old file damaged: %v", err)
	}
}

func TestReadFileRejectsOtherFormats(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		data []byte
		want string
	}{
		"legacy.pt":  {[]byte("\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03."), "legacy torch.save format"},
		"text.txt":   {[]byte("hello, world"), "neither a torch.save zip archive nor a safetensors file"},
		"tiny.bin":   {[]byte("PK"), "neither"},
		"broken.pth": {[]byte("PK\x03\x04garbage"), "truncated: the file stops at byte 11, inside the header of the zip entry at byte 0"},
		"empty.pth":  {nil, "(it has only 0 bytes)"},
	}
	for name, c := range cases {
		path := filepath.Join(dir, name)
		os.WriteFile(path, c.data, 0o644)
		_, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming the file and containing %q", name, err, c.want)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file gave no error")
	}
}
