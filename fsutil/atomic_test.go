package fsutil

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

// WriteFileNew never replaces a file, even one that appears after a
// caller's check, and leaves no temporary file; WriteFileAtomic replaces.
func TestWriteFileNewNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.pth")
	if err := WriteFileNew(p, writeString("first")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileNew(p, writeString("second")); !errors.Is(err, ErrExists) {
		t.Fatalf("over an existing file: %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "first" {
		t.Fatalf("file holds %q, want the first write", b)
	}
	if err := WriteFileAtomic(p, writeString("third")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "third" {
		t.Fatalf("WriteFileAtomic left %q", b)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 {
		t.Fatalf("directory holds %v, want only m.pth", names)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
}

// A failed write leaves nothing: no file, no temporary file.
func TestWriteFileNewFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.pth")
	boom := errors.New("boom")
	if err := WriteFileNew(p, func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the writer's error", err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("directory holds %v after a failed write", names)
	}
}
