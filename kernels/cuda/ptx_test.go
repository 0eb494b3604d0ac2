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

// vecOK admits 16-byte loads only for whole, aligned chunks of 8 elements.
func TestVecOK(t *testing.T) {
	l2 := convShape{N: 100, C: 64, H: 8, W: 8, K: 128, R: 3, S: 3, P: 4, Q: 4, Stride: 2, Pad: 1}
	stem := convShape{N: 100, C: 3, H: 32, W: 32, K: 64, R: 7, S: 7, P: 16, Q: 16, Stride: 2, Pad: 3}
	l4 := convShape{N: 100, C: 512, H: 1, W: 1, K: 512, R: 3, S: 3, P: 1, Q: 1, Stride: 1, Pad: 1}
	for _, c := range []struct {
		mode int
		s    convShape
		a, w uintptr
		want bool
	}{
		{modeFwd, l2, 0x1000, 0x2000, true},
		{modeFwd, l2, 0x1000, 0x2002, false},   // weight view off a 16-byte boundary
		{modeFwd, stem, 0x1000, 0x2000, false}, // C*R*S = 147
		{modeFwd, l4, 0x1000, 0x2000, true},
		{modeBwdWeight, l2, 0x1000, 0x2000, true}, // P*Q = 16
		{modeBwdWeight, l2, 0x1008, 0x2000, false},
		{modeBwdWeight, l4, 0x1000, 0x2000, false}, // P*Q = 1
		{modeBwdWeight, stem, 0x1000, 0x2000, true},
		{modeBwdData, l2, 0x1000, 0x2000, false},
	} {
		if got := vecOK(c.mode, c.s, c.a, c.w); got != c.want {
			t.Errorf("vecOK(mode %d, %+v, %#x, %#x) = %v, want %v", c.mode, c.s, c.a, c.w, got, c.want)
		}
	}
}

// Every kernel that plan names for the test shapes and ResNet-18's, in every
// mode and precision, with aligned operands and operands one element off,
// is an entry of ptx/conv.ptx (a name the host builds wrong fails here, not
// first on the device).
func TestPlannedKernelsExist(t *testing.T) {
	ptx, err := os.ReadFile("ptx/conv.ptx")
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{sms: 132}
	seen := map[string]bool{}
	for _, cc := range append(append([]convCase{}, convCases...), resnetConvs...) {
		P, Q := convOut(cc)
		s := convShape{N: int32(cc.n), C: int32(cc.c), H: int32(cc.h), W: int32(cc.w), K: int32(cc.k), R: int32(cc.r),
			S: int32(cc.s), P: int32(P), Q: int32(Q), Stride: int32(cc.stride), Pad: int32(cc.pad)}
		win, _ := s.window()
		for _, g := range []convShape{s, win} {
			for mode := modeFwd; mode <= modeBwdWeight; mode++ {
				for prec := range precNames {
					for _, off := range []uintptr{0, 2} {
						name := b.plan(mode, prec, g, 0x1000+off, 0x2000+off).kernel
						if !seen[name] && !strings.Contains(string(ptx), ".entry "+name+"(") {
							t.Errorf("plan(mode %d, %s, %+v) names %s, which ptx/conv.ptx lacks", mode, precNames[prec], g, name)
						}
						seen[name] = true
					}
				}
			}
		}
	}
	for _, want := range []string{"conv_fwd_f16_vec", "conv_bwdw_f16_vec", "conv_bwdd_bf16", "dense_bwdd_f16"} {
		if !seen[want] {
			t.Errorf("no test shape plans %s", want)
		}
	}
}
