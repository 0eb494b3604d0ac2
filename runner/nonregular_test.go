package runner

import (
	"path/filepath"
	"testing"

	"resnetlab/ckpt"
	"resnetlab/internal/testutil"
)

// hostileFiles makes a FIFO and a symlink to /dev/zero named name in
// fresh directories; reading either the naive way blocks or never ends.
func hostileFiles(t *testing.T, name string) map[string]string {
	t.Helper()
	fifoDir, zeroDir := t.TempDir(), t.TempDir()
	fifo, zero := filepath.Join(fifoDir, name), filepath.Join(zeroDir, name)
	testutil.HostileFiles(t, fifo, zero)
	return map[string]string{fifo: fifoDir, zero: zeroDir}
}

func TestCheckpointReadRefusesNonRegular(t *testing.T) {
	for p := range hostileFiles(t, "model_1.pth") {
		testutil.RefusedPromptly(t, p, func() error { _, _, err := ckpt.ReadFile(p, ""); return err })
		testutil.RefusedPromptly(t, p, func() error { _, _, err := ckpt.ReadMeta(p); return err })
	}
}

func TestImportRefusesNonRegular(t *testing.T) {
	for p := range hostileFiles(t, "in.safetensors") {
		out := t.TempDir()
		testutil.RefusedPromptly(t, p, func() error { return ImportModel(p, out, 1, ImportOptions{}) })
	}
}
