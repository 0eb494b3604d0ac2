package runner

import (
	"os"
	"path/filepath"
	"resnetlab/ckpt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostileFiles makes a FIFO and a symlink to /dev/zero named name in
// fresh directories; reading either the naive way blocks or never ends.
func hostileFiles(t *testing.T, name string) map[string]string {
	t.Helper()
	fifoDir, zeroDir := t.TempDir(), t.TempDir()
	fifo := filepath.Join(fifoDir, name)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	zero := filepath.Join(zeroDir, name)
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	return map[string]string{fifo: fifoDir, zero: zeroDir}
}

func wantRefused(t *testing.T, path string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "is not a regular file") {
			t.Fatalf("%s: want 'not a regular file' naming the path, got %v", path, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still reading after 5s", path)
	}
}

func TestCheckpointReadRefusesNonRegular(t *testing.T) {
	for p := range hostileFiles(t, "model_1.pth") {
		wantRefused(t, p, func() error { _, _, err := ckpt.ReadFile(p, ""); return err })
		wantRefused(t, p, func() error { _, _, err := ckpt.ReadMeta(p); return err })
	}
}

func TestImportRefusesNonRegular(t *testing.T) {
	for p := range hostileFiles(t, "in.safetensors") {
		out := t.TempDir()
		wantRefused(t, p, func() error { return ImportModel(p, out, 1, ImportOptions{}) })
	}
}
