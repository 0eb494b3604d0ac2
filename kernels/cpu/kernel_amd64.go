//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	xcpu "golang.org/x/sys/cpu"
)

// usingAsm reports whether microKernel is the assembly kernel.
var usingAsm = false

func init() {
	if xcpu.X86.HasAVX2 && xcpu.X86.HasFMA {
		microKernel, usingAsm = kernelAsm, true
	}
}

// sgemm6x16 is the AVX2/FMA micro-kernel (kernel_amd64.s): a 6x16 tile in
// twelve 8-wide accumulators, one k step per iteration: two B loads, six A
// broadcasts, twelve FMAs. flags&1 selects C += tile instead of C = tile.
//
//go:noescape
func sgemm6x16(kc int, a, b, c *float32, ldc int, flags int)

// kernelAsm checks the bounds the assembly relies on, then calls it.
func kernelAsm(kc int, a, b, c []float32, ldc int, acc bool) {
	_ = a[kc*mr-1]
	_ = b[kc*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	flags := 0
	if acc {
		flags = 1
	}
	sgemm6x16(kc, &a[0], &b[0], &c[0], ldc, flags)
}

// roundF16F16C writes src rounded to fp16 into dst for n/8 blocks of 8
// (half_amd64.s).
//
//go:noescape
func roundF16F16C(dst, src *float32, n int)

// cpuidECX1 is CPUID leaf 1's ECX (half_amd64.s).
func cpuidECX1() uint32

// haveF16C: the CPU converts between fp32 and fp16 in hardware (every
// AVX2 CPU does, but the bit is checked).
var haveF16C = xcpu.X86.HasAVX && cpuidECX1()&(1<<29) != 0

// roundF16Vec writes the longest multiple-of-8 prefix of src rounded to
// fp16 into dst (same length) and returns its length.
func roundF16Vec(dst, src []float32) int {
	n := len(src) &^ 7
	if !haveF16C || n == 0 {
		return 0
	}
	_ = dst[n-1]
	roundF16F16C(&dst[0], &src[0], n)
	return n
}

// adamAVX2 runs the Adam update on n/8 blocks of 8 and reports whether
// any of those gradients was inf or NaN (adam_amd64.s). stream writes the
// outputs with non-temporal stores, which need them 32-byte aligned.
//
//go:noescape
func adamAVX2(p, grad, m, v, po, mo, vo *float32, n int, c *adamConsts, stream bool) bool

// adamVec updates the longest multiple-of-8 prefix with AVX2 and returns
// its length and whether a gradient in it was inf or NaN.
func adamVec(a *adamArrays, c *adamConsts) (int, bool) {
	n := len(a.p) &^ 7
	if !usingAsm || n == 0 {
		return 0, false
	}
	_, _, _, _, _, _ = a.g[n-1], a.m[n-1], a.v[n-1], a.po[n-1], a.mo[n-1], a.vo[n-1]
	bad := adamAVX2(&a.p[0], &a.g[0], &a.m[0], &a.v[0], &a.po[0], &a.mo[0], &a.vo[0], n, c, streams(a))
	return n, bad
}

// streams reports whether a's outputs should bypass the cache: an
// out-of-place update (its outputs are read next step, not now) whose
// outputs are 32-byte aligned, as VMOVNTPS requires.
func streams(a *adamArrays) bool {
	if &a.po[0] == &a.p[0] || &a.mo[0] == &a.m[0] || &a.vo[0] == &a.v[0] {
		return false
	}
	return (uintptr(unsafe.Pointer(&a.po[0]))|uintptr(unsafe.Pointer(&a.mo[0]))|uintptr(unsafe.Pointer(&a.vo[0])))%32 == 0
}
