package cuda

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"resnetlab/kernels"
)

// Element-wise ops round once to the output dtype on both backends, so they
// must agree to fp32 rounding.
func TestElementwiseMatchesCPU(t *testing.T) {
	e := newEnv(t)
	const tol = 1e-6
	for _, dt := range dtypes {
		shape := []int{3, 5, 7, 11}
		a, b := e.randn(kernels.CatActivations, dt, 1, shape...), e.randn(kernels.CatActivations, dt, 1, shape...)

		y := e.out(dt, shape...)
		e.g.Fill(y.g, 0.3)
		e.c.Fill(y.c, 0.3)
		e.check(name("Fill ", dt), y, tol)

		e.g.Copy(y.g, a.g)
		e.c.Copy(y.c, a.c)
		e.g.Scale(y.g, -2.5)
		e.c.Scale(y.c, -2.5)
		e.check(name("Scale ", dt), y, tol)

		e.g.ReLUForward(y.g, a.g)
		e.c.ReLUForward(y.c, a.c)
		e.check(name("ReLUForward ", dt), y, tol)
		dx := e.out(dt, shape...)
		e.g.ReLUBackward(dx.g, b.g, y.g)
		e.c.ReLUBackward(dx.c, b.c, y.c)
		e.check(name("ReLUBackward ", dt), dx, tol)

		e.g.Add(dx.g, a.g, b.g)
		e.c.Add(dx.c, a.c, b.c)
		e.check(name("Add ", dt), dx, tol)
		e.g.Add(a.g, a.g, b.g) // y may alias an input
		e.c.Add(a.c, a.c, b.c)
		e.check(name("Add in place ", dt), a, tol)

		for _, dt2 := range dtypes {
			z := e.out(dt2, shape...)
			e.g.Copy(z.g, b.g)
			e.c.Copy(z.c, b.c)
			e.check(name("Copy ", dt, "->", dt2), z, tol)
			e.free(z)
		}
		e.free(a, b, y, dx)
	}
}

type convCase struct {
	n, c, h, w, k, r, s, stride, pad int
}

var convCases = []convCase{
	{2, 3, 9, 9, 8, 3, 3, 1, 1},       // odd sizes, partial tiles
	{3, 16, 8, 8, 32, 3, 3, 2, 1},     // stride 2
	{2, 20, 7, 7, 24, 1, 1, 2, 0},     // 1x1 downsample
	{2, 3, 32, 32, 64, 7, 7, 2, 3},    // ResNet stem
	{4, 256, 2, 2, 80, 3, 3, 1, 1},    // long reduction: split-K forward
	{16, 64, 8, 8, 64, 3, 3, 1, 1},    // split-K weight gradient
	{3, 130, 5, 6, 70, 3, 2, 2, 1},    // ragged everything
	{100, 128, 4, 4, 128, 3, 3, 1, 1}, // ResNet layer2 at batch 100
	{20, 512, 1, 1, 512, 3, 3, 1, 1},  // layer4 on a 1x1 map: centre tap only
	{20, 256, 2, 2, 512, 3, 3, 2, 1},  // layer4's entry: 2x2 taps of 3x3
	{3, 40, 1, 1, 24, 3, 3, 1, 1},     // 1x1 map, partial tiles
	{70, 136, 1, 1, 200, 1, 1, 1, 0},  // dense GEMMs with partial tiles in every mode
	{2, 8, 1, 5, 8, 3, 3, 1, 1},       // windows start at different taps: all taps
	{2, 3, 11, 11, 8, 8, 8, 2, 3},     // 64 taps: every bit of the gather's tap masks
}

// convPrec is a storage dtype plus the fp32 TF32 switch, with tolerances:
// exact fp32 1e-5; TF32 (10-bit operand mantissa) 2e-3; fp16 1e-2; bf16 2e-2.
type convPrec struct {
	dt   kernels.DType
	tf32 bool
	tol  float64
}

var convPrecs = []convPrec{{kernels.F32, false, 1e-5}, {kernels.F32, true, 2e-3}, {kernels.F16, false, 1e-2}, {kernels.BF16, false, 2e-2}}

func (p convPrec) String() string {
	if p.tf32 {
		return "tf32"
	}
	return p.dt.String()
}

// TestConvMatchesReference checks the three convolution passes against
// naive float64 loops over the same (rounded) inputs, and the CPU backend
// against the same reference, so a disagreement names the side at fault.
func TestConvMatchesReference(t *testing.T) {
	e := newEnv(t)
	defer func() { e.g.TF32 = true }()
	for _, cc := range convCases {
		for _, pr := range convPrecs {
			e.g.TF32 = pr.tf32
			cp := kernels.ConvParams{Stride: cc.stride, Pad: cc.pad}
			P, Q := convOut(cc)
			x := e.randn(kernels.CatActivations, pr.dt, 1, cc.n, cc.c, cc.h, cc.w)
			w := e.randn(kernels.CatParams, pr.dt, 0.2, cc.k, cc.c, cc.r, cc.s)
			dy := e.randn(kernels.CatActivations, pr.dt, 1, cc.n, cc.k, P, Q)
			y, dx, dw := e.out(pr.dt, cc.n, cc.k, P, Q), e.out(pr.dt, cc.n, cc.c, cc.h, cc.w), e.out(pr.dt, cc.k, cc.c, cc.r, cc.s)
			e.g.Conv2dForward(y.g, x.g, w.g, cp)
			e.c.Conv2dForward(y.c, x.c, w.c, cp)
			e.g.Conv2dBackward(dx.g, dw.g, dy.g, x.g, w.g, cp)
			e.c.Conv2dBackward(dx.c, dw.c, dy.c, x.c, w.c, cp)
			xv, wv, dyv := download(e.c, x.c), download(e.c, w.c), download(e.c, dy.c)
			tag := fmt.Sprintf("%+v %v", cc, pr)
			for _, o := range []struct {
				what string
				p    pair
				ref  []float32
			}{{"y", y, naiveFwd(cc, xv, wv)}, {"dx", dx, naiveDgrad(cc, dyv, wv)}, {"dw", dw, naiveWgrad(cc, dyv, xv)}} {
				if r := relErr(download(e.g, o.p.g), o.ref); !(r <= pr.tol) {
					t.Errorf("conv %s %s: GPU relative error %.3g > %.1g vs naive reference", o.what, tag, r, pr.tol)
				}
				if r := relErr(download(e.c, o.p.c), o.ref); !(r <= tolFor(pr.dt, 1e-5)) {
					t.Errorf("conv %s %s: CPU backend relative error %.3g vs naive reference (CPU bug)", o.what, tag, r)
				}
			}
			e.free(x, w, dy, y, dx, dw)
		}
	}
}

// Split-K sums partials in a fixed order: two runs agree bit for bit.
func TestConvDeterministic(t *testing.T) {
	e := newEnv(t)
	cp := kernels.ConvParams{Stride: 1, Pad: 1}
	x := e.randn(kernels.CatActivations, kernels.F16, 1, 32, 64, 8, 8)
	w := e.randn(kernels.CatParams, kernels.F16, 0.1, 64, 64, 3, 3)
	dy := e.randn(kernels.CatActivations, kernels.F16, 1, 32, 64, 8, 8)
	var first []float32
	for i := 0; i < 3; i++ {
		dw := e.out(kernels.F16, 64, 64, 3, 3)
		e.g.Conv2dBackward(nil, dw.g, dy.g, x.g, w.g, cp)
		got := download(e.g, dw.g)
		if first == nil {
			first = got
		} else if fmt.Sprint(got) != fmt.Sprint(first) {
			t.Fatalf("run %d of the split-K weight gradient differs from run 0", i)
		}
		e.free(dw)
	}
}

func TestLinearMatchesCPU(t *testing.T) {
	e := newEnv(t)
	for _, dt := range dtypes {
		for _, sz := range [][3]int{{100, 512, 10}, {7, 33, 65}} {
			n, in, o := sz[0], sz[1], sz[2]
			x, w := e.randn(kernels.CatActivations, dt, 1, n, in), e.randn(kernels.CatParams, dt, 0.1, o, in)
			bias, dy := e.randn(kernels.CatParams, dt, 1, o), e.randn(kernels.CatActivations, dt, 1, n, o)
			y, dx, dw, db := e.out(dt, n, o), e.out(dt, n, in), e.out(dt, o, in), e.out(dt, o)
			e.g.LinearForward(y.g, x.g, w.g, bias.g)
			e.c.LinearForward(y.c, x.c, w.c, bias.c)
			e.g.LinearBackward(dx.g, dw.g, db.g, dy.g, x.g, w.g)
			e.c.LinearBackward(dx.c, dw.c, db.c, dy.c, x.c, w.c)
			tol := tolFor(dt, 1e-5)
			tag := fmt.Sprint(sz, dt)
			e.check("linear y "+tag, y, tol)
			e.check("linear dx "+tag, dx, tol)
			e.check("linear dw "+tag, dw, tol)
			e.check("linear db "+tag, db, tol)
			e.free(x, w, bias, dy, y, dx, dw, db)
		}
	}
}

func TestBatchNormMatchesCPU(t *testing.T) {
	e := newEnv(t)
	for _, dt := range dtypes {
		for _, sh := range [][]int{{4, 3, 5, 7}, {100, 64, 8, 8}, {100, 512, 1, 1}} {
			c := sh[1]
			tol := tolFor(dt, 1e-5)
			tag := fmt.Sprint(sh, dt)
			xv := e.normals(kernels.NumElems(sh), 2)
			for i := range xv {
				xv[i] += 3 // a mean well off zero exercises the two-pass variance
			}
			x, dy := e.values(dt, xv, sh...), e.randn(kernels.CatActivations, dt, 1, sh...)
			gamma, beta := e.randn(kernels.CatParams, kernels.F32, 1, c), e.randn(kernels.CatParams, kernels.F32, 1, c)
			rm, rv := e.randn(kernels.CatOptState, kernels.F32, 1, c), e.values(kernels.F32, ones(c), c)
			sm, si := e.out(kernels.F32, c), e.out(kernels.F32, c)
			y := e.out(dt, sh...)
			e.g.BatchNormForward(y.g, x.g, gamma.g, beta.g, rm.g, rv.g, sm.g, si.g, true, 0.1, 1e-5)
			e.c.BatchNormForward(y.c, x.c, gamma.c, beta.c, rm.c, rv.c, sm.c, si.c, true, 0.1, 1e-5)
			e.check("bn train y "+tag, y, tol)
			e.check("bn saveMean "+tag, sm, 1e-5)
			e.check("bn saveInvStd "+tag, si, 1e-5)
			e.check("bn runMean "+tag, rm, 1e-5)
			e.check("bn runVar "+tag, rv, 1e-5)
			dx, dg, dbt := e.out(dt, sh...), e.out(kernels.F32, c), e.out(kernels.F32, c)
			e.g.BatchNormBackward(dx.g, dg.g, dbt.g, dy.g, x.g, gamma.g, sm.g, si.g)
			e.c.BatchNormBackward(dx.c, dg.c, dbt.c, dy.c, x.c, gamma.c, sm.c, si.c)
			e.check("bn dx "+tag, dx, tol)
			e.check("bn dgamma "+tag, dg, tolFor(dt, 1e-5)/10)
			e.check("bn dbeta "+tag, dbt, tolFor(dt, 1e-5)/10)
			e.g.BatchNormForward(y.g, x.g, gamma.g, beta.g, rm.g, rv.g, nil, nil, false, 0.1, 1e-5)
			e.c.BatchNormForward(y.c, x.c, gamma.c, beta.c, rm.c, rv.c, nil, nil, false, 0.1, 1e-5)
			e.check("bn eval y "+tag, y, tol)
			e.free(x, dy, gamma, beta, rm, rv, sm, si, y, dx, dg, dbt)
		}
	}
}

func ones(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

func TestPoolingMatchesCPU(t *testing.T) {
	e := newEnv(t)
	pp := kernels.PoolParams{K: 3, Stride: 2, Pad: 1}
	for _, dt := range dtypes {
		for _, sh := range [][]int{{3, 5, 16, 16}, {2, 3, 7, 9}} {
			tag := fmt.Sprint(sh, dt)
			P, Q := kernels.OutSize(sh[2], 3, 2, 1), kernels.OutSize(sh[3], 3, 2, 1)
			x, dy := e.randn(kernels.CatActivations, dt, 1, sh...), e.randn(kernels.CatActivations, dt, 1, sh[0], sh[1], P, Q)
			y, dx := e.out(dt, sh[0], sh[1], P, Q), e.out(dt, sh...)
			e.g.MaxPoolForward(y.g, x.g, pp)
			e.c.MaxPoolForward(y.c, x.c, pp)
			e.g.MaxPoolBackward(dx.g, dy.g, x.g, pp)
			e.c.MaxPoolBackward(dx.c, dy.c, x.c, pp)
			e.check("maxpool y "+tag, y, 1e-6)
			e.check("maxpool dx "+tag, dx, tolFor(dt, 1e-6))
			a, ga := e.out(dt, sh[0], sh[1]), e.randn(kernels.CatActivations, dt, 1, sh[0], sh[1])
			e.g.GlobalAvgPoolForward(a.g, x.g)
			e.c.GlobalAvgPoolForward(a.c, x.c)
			e.g.GlobalAvgPoolBackward(dx.g, ga.g)
			e.c.GlobalAvgPoolBackward(dx.c, ga.c)
			e.check("avgpool y "+tag, a, tolFor(dt, 1e-6))
			e.check("avgpool dx "+tag, dx, tolFor(dt, 1e-6))
			e.free(x, dy, y, dx, a, ga)
		}
	}
}

func TestSoftmaxCrossEntropyMatchesCPU(t *testing.T) {
	e := newEnv(t)
	for _, dt := range dtypes {
		for _, scale := range []float32{1, 32} {
			n, k := 100, 10
			lab := make([]float32, n)
			for i := range lab {
				lab[i] = float32(e.rng.Intn(k))
			}
			logits, labels := e.randn(kernels.CatActivations, dt, 3, n, k), e.values(kernels.F32, lab, n)
			loss, dl := e.out(kernels.F32, 1), e.out(dt, n, k)
			e.g.SoftmaxCrossEntropy(loss.g, dl.g, logits.g, labels.g, scale)
			e.c.SoftmaxCrossEntropy(loss.c, dl.c, logits.c, labels.c, scale)
			tag := fmt.Sprint(dt, " scale ", scale)
			e.check("CE loss "+tag, loss, 1e-5)
			e.check("CE dlogits "+tag, dl, tolFor(dt, 1e-5))
			e.g.SoftmaxCrossEntropy(loss.g, nil, logits.g, labels.g, scale)
			e.c.SoftmaxCrossEntropy(loss.c, nil, logits.c, labels.c, scale)
			e.check("CE loss (eval) "+tag, loss, 1e-5)
			e.free(logits, labels, loss, dl)
		}
	}
}

// The device's Adam does the CPU's IEEE operations one by one (no FMA
// contraction), so parameters and moments must equal the CPU's bit for bit:
// a Gemini chunk updated on the host under a budget then ends where the
// device would have put it. Both kernels (adam, and adam_copy with its
// fp16/bf16 copies) and both of their paths must: 8195 elements are two
// chunks and a 3-element tail after the 4-wide vector path; a view at
// offset 1 puts every array off its 16- (fp32) or 8-byte (fp16/bf16)
// boundary, so it takes the scalar path throughout, one at offset 4 is
// aligned again.
func TestAdamMatchesCPU(t *testing.T) {
	e := newEnv(t)
	cases := []adamCase{{5000, 0}, {10000, 0}, {17, 0}, {4096, 0}, {8195, 0}, {4097, 1}, {4097, 4}}
	hp := kernels.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, GradScale: 0.5}
	for _, pdt := range dtypes {
		for _, gdt := range dtypes {
			for _, fused := range []bool{false, true} {
				s := e.adamSet(cases, pdt, gdt, fused)
				if fused {
					e.g.AdamStepCopy(sides(true, s.p), sides(true, s.g), sides(true, s.m), sides(true, s.v), sides(true, s.c), hp)
					kernels.AdamStepCopy(e.c, sides(false, s.p), sides(false, s.g), sides(false, s.m), sides(false, s.v), sides(false, s.c), hp)
				} else {
					e.g.AdamStep(sides(true, s.p), sides(true, s.g), sides(true, s.m), sides(true, s.v), hp)
					e.c.AdamStep(sides(false, s.p), sides(false, s.g), sides(false, s.m), sides(false, s.v), hp)
				}
				for i, c := range cases {
					tag := fmt.Sprintf("params %v grads %v copy %v, tensor %d (%d at offset %d)", pdt, gdt, fused, i, c.n, c.off)
					for _, x := range []struct {
						what string
						p    pair
					}{{"p", s.p[i]}, {"m", s.m[i]}, {"v", s.v[i]}, {"copy", s.c[i]}} {
						e.sameBits("Adam "+x.what+" of "+tag, x.p)
					}
				}
				e.free(s.bases...)
			}
		}
	}
}

// adamCase is one tensor of TestAdamMatchesCPU: n elements at element off
// of a buffer of off+n.
type adamCase struct{ n, off int }

// adamOperands are the tensors of one Adam step on both backends, views
// into bases; c[i] is the zero pair where tensor i has no copy.
type adamOperands struct{ p, g, m, v, c, bases []pair }

// adamSet makes the operands of cases: fp32 moments (v >= 0), params of
// pdt, grads of gdt and, with copies, fp16 and bf16 copies in turn (NaN on
// the device until written) for every tensor but the third.
func (e *env) adamSet(cases []adamCase, pdt, gdt kernels.DType, copies bool) adamOperands {
	var s adamOperands
	view := func(cat kernels.Category, dt kernels.DType, scale float64, c adamCase) pair {
		b := e.randn(cat, dt, scale, c.off+c.n)
		s.bases = append(s.bases, b)
		return pair{kernels.View(b.g, c.off, c.n), kernels.View(b.c, c.off, c.n)}
	}
	for i, c := range cases {
		s.p = append(s.p, view(kernels.CatParams, pdt, 1, c))
		s.g = append(s.g, view(kernels.CatGrads, gdt, 1, c))
		s.m = append(s.m, view(kernels.CatOptState, kernels.F32, 0.1, c))
		v := view(kernels.CatOptState, kernels.F32, 0.1, c)
		e.g.ReLUForward(v.g, v.g)
		e.c.ReLUForward(v.c, v.c)
		s.v = append(s.v, v)
		var cp pair
		if copies && i != 2 {
			cp = view(kernels.CatParams, []kernels.DType{kernels.F16, kernels.BF16}[i%2], 1, c)
			e.g.Fill(cp.g, float32(math.NaN()))
		}
		s.c = append(s.c, cp)
	}
	return s
}

// sides returns the device (g) or CPU tensors of ts.
func sides(g bool, ts []pair) []*kernels.Tensor {
	out := make([]*kernels.Tensor, len(ts))
	for i, p := range ts {
		out[i] = p.c
		if g {
			out[i] = p.g
		}
	}
	return out
}

// sameBits reports the first element where p's two sides differ in their
// bits (nothing for the zero pair).
func (e *env) sameBits(what string, p pair) {
	e.t.Helper()
	if p.g == nil {
		return
	}
	g, h := download(e.g, p.g), download(e.c, p.c)
	for j := range g {
		if math.Float32bits(g[j]) != math.Float32bits(h[j]) {
			e.t.Errorf("%s element %d: device %x, CPU %x", what, j, math.Float32bits(g[j]), math.Float32bits(h[j]))
			return
		}
	}
}

func TestNonFinite(t *testing.T) {
	e := newEnv(t)
	a := e.randn(kernels.CatGrads, kernels.F32, 1, 10000)
	h := e.randn(kernels.CatGrads, kernels.F16, 1, 3, 5000)
	bf := e.randn(kernels.CatGrads, kernels.BF16, 1, 77)
	ts := []*kernels.Tensor{a.g, h.g, bf.g}
	if e.g.NonFinite(ts) {
		t.Fatal("NonFinite on finite tensors = true")
	}
	for _, c := range []struct {
		p   pair
		i   int
		bad float32
	}{{a, 9999, float32(math.NaN())}, {h, 14999, float32(math.Inf(1))}, {h, 0, float32(math.Inf(-1))}, {bf, 40, float32(math.NaN())}, {bf, 76, float32(math.Inf(1))}, {h, 7, 70000}} {
		v := download(e.g, c.p.g)
		keep := v[c.i]
		v[c.i] = c.bad
		e.g.Upload(c.p.g, v)
		if !e.g.NonFinite(ts) {
			t.Errorf("NonFinite missed %v at [%d] of %v", c.bad, c.i, c.p.g)
		}
		v[c.i] = keep
		e.g.Upload(c.p.g, v)
		if e.g.NonFinite(ts) {
			t.Errorf("NonFinite still true after restoring %v", c.p.g)
		}
	}
	e.free(a, h, bf)
}

func TestMemoryAccounting(t *testing.T) {
	g := device(t)
	base := g.MemStats()
	if base.Capacity < 1<<30 {
		t.Fatalf("Capacity %d, want the device's memory size", base.Capacity)
	}
	g.ResetPeak()
	p := g.New(kernels.CatParams, kernels.F32, 1000)
	a := g.New(kernels.CatActivations, kernels.F16, 3, 512)
	s := g.MemStats()
	if d := s.InUse[kernels.CatParams] - base.InUse[kernels.CatParams]; d != 4000 {
		t.Errorf("params in use grew by %d, want 4000", d)
	}
	if d := s.InUse[kernels.CatActivations] - base.InUse[kernels.CatActivations]; d != 3072 {
		t.Errorf("activations in use grew by %d, want 3072", d)
	}
	if z := download(g, a); relErr(z, make([]float32, len(z))) != 0 {
		t.Error("New did not return zeros")
	}
	reserved, dev := g.Reserved(), a.Dev
	g.Free(a)
	b := g.New(kernels.CatActivations, kernels.F16, 3, 500) // same size class
	if b.Dev != dev || g.Reserved() != reserved {
		t.Errorf("freed block not reused: %#x vs %#x, reserved %d -> %d", b.Dev, dev, reserved, g.Reserved())
	}
	s = g.MemStats()
	if s.Peak[kernels.CatActivations]-base.InUse[kernels.CatActivations] != 3072 || s.InUse[kernels.CatActivations]-base.InUse[kernels.CatActivations] != 3000 {
		t.Errorf("activations peak/in use %d/%d, want base+3072/base+3000", s.Peak[kernels.CatActivations], s.InUse[kernels.CatActivations])
	}
	g.ResetPeak()
	if s = g.MemStats(); s.Peak != s.InUse || s.TotalPeak != s.Total() {
		t.Errorf("after ResetPeak: peak %v total peak %d, in use %v", s.Peak, s.TotalPeak, s.InUse)
	}
	g.Free(p)
	g.Free(b)
}

// A failed driver call names the call and the CUresult.
func TestDriverErrorsNameCallAndResult(t *testing.T) {
	g := device(t)
	defer func() {
		var e *Error
		r := recover()
		err, _ := r.(error)
		if !errors.As(err, &e) || e.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
			t.Fatalf("allocating 4 PB panicked with %v, want a CUDA_ERROR_OUT_OF_MEMORY *Error", r)
		}
		t.Logf("error text: %v", e)
	}()
	g.New(kernels.CatData, kernels.F32, 1<<50)
}
