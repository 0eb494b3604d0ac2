//go:build amd64 && !purego

package cpu

import (
	"math"
	"testing"
	"unsafe"

	"resnetlab/kernels"
)

// TestAdamStreamingStoresMatch checks the out-of-place AVX2 update with
// non-temporal stores against the same update with ordinary stores and
// the scalar one, and that unaligned outputs take the ordinary path.
func TestAdamStreamingStoresMatch(t *testing.T) {
	if !usingAsm {
		t.Skip("no AVX2/FMA on this CPU")
	}
	rng := newRNG(11)
	const n = 4096 + 8
	hp := kernels.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, GradScale: 0.5}
	c := newAdamConsts(hp, hp.GradScale, float32(1-math.Pow(0.9, 3)), float32(1-math.Pow(0.999, 3)))
	in := func(abs bool) []float32 {
		x := randVals(rng, n)
		for i := range x {
			if abs {
				x[i] = float32(math.Abs(float64(x[i])))
			}
		}
		return x
	}
	p, g, m, v := in(false), in(false), in(false), in(true)
	out := func(off int) []float32 { return aligned32(n + 8)[off : off+n] }
	run := func(off int) (streamed bool, po, mo, vo []float32) {
		a := adamArrays{p: p, g: g, m: m, v: v, po: out(off), mo: out(off), vo: out(off)}
		streamed = streams(&a)
		if k, bad := adamVec(&a, &c); k != n || bad {
			t.Fatalf("adamVec did %d of %d elements, non-finite %v", k, n, bad)
		}
		return streamed, a.po, a.mo, a.vo
	}
	s0, po0, mo0, vo0 := run(0)
	s1, po1, mo1, vo1 := run(1)
	if !s0 || s1 {
		t.Fatalf("streaming chosen for aligned outputs %v (want true), for unaligned %v (want false)", s0, s1)
	}
	want := adamArrays{p: p, g: g, m: m, v: v, po: make([]float32, n), mo: make([]float32, n), vo: make([]float32, n)}
	adamGo(&want, &c)
	for _, r := range [][3][]float32{{po0, mo0, vo0}, {po1, mo1, vo1}} {
		sameBits(t, "p", r[0], want.po)
		sameBits(t, "m", r[1], want.mo)
		sameBits(t, "v", r[2], want.vo)
	}
}

// aligned32 returns n floats starting on a 32-byte boundary.
func aligned32(n int) []float32 {
	b := make([]float32, n+8)
	off := int(uintptr(unsafe.Pointer(&b[0]))%32) / 4
	if off != 0 {
		off = 8 - off
	}
	return b[off : off+n]
}
