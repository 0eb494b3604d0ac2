package fsutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"resnetlab/internal/testutil"
)

func TestRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo, zero := filepath.Join(dir, "model_1.pth"), filepath.Join(dir, "zero.pth")
	testutil.HostileFiles(t, fifo, zero)
	for _, p := range []string{fifo, zero, dir} {
		testutil.RefusedPromptly(t, p, func() error { _, err := ReadFile(p, 1<<20); return err })
		testutil.RefusedPromptly(t, p, func() error {
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
