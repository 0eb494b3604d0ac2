package spec

import (
	"path/filepath"
	"testing"

	"resnetlab/internal/testutil"
)

func TestLoadSpecRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo, zero := filepath.Join(dir, "fifo.toml"), filepath.Join(dir, "zero.toml")
	testutil.HostileFiles(t, fifo, zero)
	for _, p := range []string{fifo, zero} {
		testutil.RefusedPromptly(t, p, func() error { _, err := Load(p); return err })
	}
}
