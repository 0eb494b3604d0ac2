package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPTXMatchesSource fails when a kernels/cuda/src/*.cu changed after its
// PTX was generated: each ptx/NAME.ptx must start with the SHA-256 of
// src/NAME.cu (gen.sh writes it), and every PTX must have a source. With
// RESNETLAB_PTX_DIR set it checks that directory (gen.sh's fresh output).
func TestPTXMatchesSource(t *testing.T) {
	dir := "ptx"
	if d := os.Getenv("RESNETLAB_PTX_DIR"); d != "" {
		dir = d
	}
	srcs, _ := filepath.Glob("src/*.cu")
	ptxs, _ := filepath.Glob(filepath.Join(dir, "*.ptx"))
	if len(srcs) == 0 {
		t.Fatalf("no kernel sources in src/ (PTX files %v)", ptxs)
	}
	for _, p := range ptxs {
		name := strings.TrimSuffix(filepath.Base(p), ".ptx")
		if _, err := os.Stat(filepath.Join("src", name+".cu")); err != nil {
			t.Errorf("%s has no source src/%s.cu", p, name)
		}
	}
	for _, src := range srcs {
		name := strings.TrimSuffix(filepath.Base(src), ".cu")
		body, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		want := "// sha256 " + hex.EncodeToString(sum[:]) + " src/" + name + ".cu"
		ptx, err := os.ReadFile(filepath.Join(dir, name+".ptx"))
		if err != nil {
			t.Errorf("%s has no PTX: %v (run kernels/cuda/gen.sh on a machine with nvcc)", src, err)
			continue
		}
		first, _, _ := strings.Cut(string(ptx), "\n")
		if first != want {
			t.Errorf("ptx/%s.ptx is stale: first line %q, want %q (rerun kernels/cuda/gen.sh)", name, first, want)
		}
		if !strings.Contains(string(ptx), ".entry") {
			t.Errorf("ptx/%s.ptx holds no kernel entry", name)
		}
	}
}
