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

// TestRoundF16F16CMatchesScalar checks the hardware fp16 rounding against
// kernels.RoundF16 bit for bit: random bit patterns (NaNs with payloads,
// infinities, subnormals of both widths), every tie just above and below
// fp16's range edges, and zeros of both signs.
func TestRoundF16F16CMatchesScalar(t *testing.T) {
	if !haveF16C {
		t.Skip("no F16C on this CPU")
	}
	rng := newRNG(21)
	var src []float32
	for range 1 << 16 {
		src = append(src, math.Float32frombits(rng.Uint32()))
	}
	for _, b := range []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x477fe000, 0x477ff000, 0x477fefff,
		0x38800000, 0x387fffff, 0x33800000, 0x33000000, 0x33000001, 0x7fc00001, 0xffbfffff} {
		src = append(src, math.Float32frombits(b))
	}
	for e := uint32(100); e < 145; e++ { // ties and near-ties at every exponent around fp16's
		for _, m := range []uint32{0x1000, 0x3000, 0xfff, 0x1001, 0x2fff, 0x7fe000} {
			src = append(src, math.Float32frombits(e<<23|m), math.Float32frombits(1<<31|e<<23|m))
		}
	}
	for len(src)%8 != 0 {
		src = append(src, 1)
	}
	dst := make([]float32, len(src))
	if n := roundF16Vec(dst, src); n != len(src) {
		t.Fatalf("rounded %d of %d", n, len(src))
	}
	for i, v := range src {
		if want := kernels.RoundF16(v); math.Float32bits(dst[i]) != math.Float32bits(want) {
			t.Fatalf("%#08x: F16C gives %#08x, RoundF16 %#08x", math.Float32bits(v), math.Float32bits(dst[i]), math.Float32bits(want))
		}
	}
}
