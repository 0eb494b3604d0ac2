package fsutil

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// refusedPromptly runs fn with a deadline: a FIFO must not block.
func refusedPromptly(t *testing.T, path string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "is not a regular file") {
			t.Fatalf("want 'not a regular file' naming %s, got %v", path, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still blocked after 5s", path)
	}
}

func TestRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model_1.pth")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	zero := filepath.Join(dir, "zero.pth")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, zero, dir} {
		refusedPromptly(t, p, func() error { _, err := ReadFile(p, 1<<20); return err })
		refusedPromptly(t, p, func() error {
			f, err := OpenRegular(p)
			if f != nil {
				f.Close()
			}
			return err
		})
	}
}

func TestReadFileLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "spec.toml")
	if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p, 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("at limit: %q %v", b, err)
	}
	if _, err := ReadFile(p, 9); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("over limit: want error naming %s, got %v", p, err)
	}
}
