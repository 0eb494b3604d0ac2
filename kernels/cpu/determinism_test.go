package cpu

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"resnetlab/kernels"
)

// allOps runs every op of the backend on seeded inputs (always F32) and
// returns every output by name. Outputs that model activations or
// gradients get dtype odt; parameters, optimizer state and BN statistics
// stay F32. Backward ops take fresh random inputs, not forward outputs, so
// their inputs do not depend on odt.
func allOps(b *Backend, odt kernels.DType) map[string]*kernels.Tensor {
	rng := newRNG(77)
	out := map[string]*kernels.Tensor{}
	in := func(shape ...int) *kernels.Tensor { return randTensor(b, rng, shape...) }
	o := func(name string, shape ...int) *kernels.Tensor {
		t := b.New(kernels.CatActivations, odt, shape...)
		out[name] = t
		return t
	}
	f := func(name string, shape ...int) *kernels.Tensor {
		t := b.New(kernels.CatParams, kernels.F32, shape...)
		out[name] = t
		return t
	}
	for i, s := range []convShape{
		{N: 5, C: 40, H: 13, W: 11, K: 33, R: 3, S: 3, stride: 1, pad: 1}, // two k-blocks
		{N: 4, C: 3, H: 30, W: 29, K: 20, R: 7, S: 7, stride: 2, pad: 3},
		{N: 4, C: 6, H: 30, W: 29, K: 8, R: 3, S: 3, stride: 1, pad: 1}, // N*P*Q > ncBlock
		{N: 6, C: 50, H: 2, W: 2, K: 40, R: 3, S: 3, stride: 2, pad: 1}, // dropped taps
	} {
		p := kernels.ConvParams{Stride: s.stride, Pad: s.pad}
		x, w := in(s.N, s.C, s.H, s.W), in(s.K, s.C, s.R, s.S)
		b.Conv2dForward(o(fmt.Sprint("conv.y", i), s.N, s.K, s.P(), s.Q()), x, w, p)
		b.Conv2dBackward(o(fmt.Sprint("conv.dx", i), x.Shape...), o(fmt.Sprint("conv.dw", i), w.Shape...), in(s.N, s.K, s.P(), s.Q()), x, w, p)
	}
	n, c, h, w := 7, 37, 9, 11
	x, gamma, beta := in(n, c, h, w), in(c), in(c)
	rm, rv, sm, si := f("bn.rm", c), f("bn.rv", c), f("bn.sm", c), f("bn.si", c)
	b.Fill(rv, 1)
	b.BatchNormForward(o("bn.y", n, c, h, w), x, gamma, beta, rm, rv, sm, si, true, 0.1, 1e-5)
	b.BatchNormForward(o("bn.yeval", n, c, h, w), x, gamma, beta, rm, rv, nil, nil, false, 0.1, 1e-5)
	b.BatchNormBackward(o("bn.dx", n, c, h, w), f("bn.dg", c), f("bn.db", c), in(n, c, h, w), x, gamma, sm, si)

	big := 3*grain + 5
	a, a2 := in(big), in(big)
	b.ReLUForward(o("relu.y", big), a)
	b.ReLUBackward(o("relu.dx", big), a2, a)
	b.Add(o("add", big), a, a2)
	b.Copy(o("copy", big), a)
	// Scale rounds its own input, so give it values exact in fp16 and bf16.
	sc := o("scale", big)
	for i := range sc.Host {
		sc.Host[i] = float32(rng.IntN(513)-256) / 256
	}
	b.Scale(sc, 0.37)
	pp := kernels.PoolParams{K: 3, Stride: 2, Pad: 1}
	P, Q := kernels.OutSize(h, 3, 2, 1), kernels.OutSize(w, 3, 2, 1)
	b.MaxPoolForward(o("maxpool.y", n, c, P, Q), x, pp)
	b.MaxPoolBackward(o("maxpool.dx", n, c, h, w), in(n, c, P, Q), x, pp)
	b.GlobalAvgPoolForward(o("gap.y", n, c), x)
	b.GlobalAvgPoolBackward(o("gap.dx", n, c, h, w), in(n, c))

	lx, lw, lb := in(9, 300), in(10, 300), in(10)
	b.LinearForward(o("fc.y", 9, 10), lx, lw, lb)
	b.LinearBackward(o("fc.dx", 9, 300), f("fc.dw", 10, 300), f("fc.db", 10), in(9, 10), lx, lw)
	labels := tensorOf(b, []float32{0, 1, 2, 3, 4, 5, 6, 7, 9}, 9)
	b.SoftmaxCrossEntropy(f("ce.loss", 1), o("ce.dz", 9, 10), in(9, 10), labels, 1024)

	ps := []*kernels.Tensor{f("adam.p0", big), f("adam.p1", 3)}
	for _, p := range ps {
		b.Upload(p, randVals(rng, p.Len()))
	}
	ms := []*kernels.Tensor{f("adam.m0", big), f("adam.m1", 3)}
	vs := []*kernels.Tensor{f("adam.v0", big), f("adam.v1", 3)}
	hp := kernels.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, GradScale: 0.5}
	for step := 1; step <= 2; step++ {
		hp.Step = step
		b.AdamStep(ps, []*kernels.Tensor{in(big), in(3)}, ms, vs, hp)
	}
	return out
}

func sortedNames(m map[string]*kernels.Tensor) []string {
	var names []string
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// TestDeterminism checks that every output is bit-identical across repeated
// runs and across worker counts 1, 2 and 3.
func TestDeterminism(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
		ref := allOps(New(WithWorkers(1)), dt)
		for _, w := range []int{3, 3, 2} {
			b := New(WithWorkers(w))
			got := allOps(b, dt)
			for _, name := range sortedNames(ref) {
				sameBits(t, fmt.Sprintf("%s/%v/%d workers", name, dt, w), got[name].Host, ref[name].Host)
			}
			if ws := b.MemStats().InUse[kernels.CatWorkspace]; ws != 0 {
				t.Errorf("workspace still charged after the ops: %d bytes", ws)
			}
		}
	}
}

// TestMixedPrecisionOutputs checks that an op writing an F16 or BF16 tensor
// stores exactly the fp32 result rounded to that type.
func TestMixedPrecisionOutputs(t *testing.T) {
	ref := allOps(New(), kernels.F32)
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
		got := allOps(New(), dt)
		for _, name := range sortedNames(ref) {
			r, g := ref[name], got[name]
			if g.DType == kernels.F32 {
				sameBits(t, name, g.Host, r.Host)
				continue
			}
			want := make([]float32, len(r.Host))
			for i, v := range r.Host {
				want[i] = roundTo(dt, v)
			}
			sameBits(t, fmt.Sprintf("%s as %v", name, dt), g.Host, want)
		}
	}
	b := New()
	h := b.New(kernels.CatActivations, kernels.F16, 4)
	b.Upload(h, []float32{1e6, 1 + 1.0/4096, -70000, float32(math.Ldexp(1, -26))})
	sameBits(t, "uploaded fp16", h.Host, []float32{float32(math.Inf(1)), 1, float32(math.Inf(-1)), 0})
	if !b.NonFinite([]*kernels.Tensor{h}) {
		t.Errorf("fp16 overflow on upload not seen by NonFinite")
	}
}
