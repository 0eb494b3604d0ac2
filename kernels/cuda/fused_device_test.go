package cuda

import (
	"math"
	"testing"

	"resnetlab/kernels"
)

// AdamStepCopy (the adam_copy kernel) must give exactly what AdamStep then
// a Copy per tensor gives: masters, moments and the fp16/bf16 copies bit
// for bit, with fp16, bf16 and fp32 gradients and a tensor without a copy.
func TestAdamStepCopyMatchesAdamThenCopy(t *testing.T) {
	b := device(t)
	e := newEnv(t)
	hp := kernels.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, GradScale: 1.0 / 1024}
	sizes := []int{5000, 10000, 17, 4096, 64}
	gdts := []kernels.DType{kernels.F16, kernels.BF16, kernels.F16, kernels.F16, kernels.F32}
	cdts := []kernels.DType{kernels.F16, kernels.BF16, kernels.F16, kernels.F16, kernels.F32} // the last gets no copy
	type side struct{ p, g, m, v, c []*kernels.Tensor }
	mk := func() side {
		e.rng.Seed(42) // both sides draw the same values
		var s side
		for i, n := range sizes {
			s.p = append(s.p, e.randn(kernels.CatParams, kernels.F32, 1, n).g)
			s.g = append(s.g, e.randn(kernels.CatGrads, gdts[i], 1000, n).g)
			s.m = append(s.m, e.randn(kernels.CatOptState, kernels.F32, 0.1, n).g)
			v := e.randn(kernels.CatOptState, kernels.F32, 0.1, n).g
			b.ReLUForward(v, v)
			s.v = append(s.v, v)
			var c *kernels.Tensor
			if i < len(sizes)-1 {
				c = b.New(kernels.CatParams, cdts[i], n)
				b.Fill(c, float32(math.NaN()))
			}
			s.c = append(s.c, c)
		}
		return s
	}
	fused, plain := mk(), mk()
	b.AdamStepCopy(fused.p, fused.g, fused.m, fused.v, fused.c, hp)
	b.AdamStep(plain.p, plain.g, plain.m, plain.v, hp)
	for i, c := range plain.c {
		if c != nil {
			b.Copy(c, plain.p[i])
		}
	}
	same := func(what string, i int, x, y *kernels.Tensor) {
		gx, gy := download(b, x), download(b, y)
		for j := range gx {
			if math.Float32bits(gx[j]) != math.Float32bits(gy[j]) {
				t.Errorf("%s of tensor %d differs at [%d]: fused %g, Adam+Copy %g", what, i, j, gx[j], gy[j])
				return
			}
		}
	}
	for i := range sizes {
		same("master", i, fused.p[i], plain.p[i])
		same("m", i, fused.m[i], plain.m[i])
		same("v", i, fused.v[i], plain.v[i])
		if fused.c[i] != nil {
			same("copy", i, fused.c[i], plain.c[i])
		}
	}
}

// LossAndNonFinite returns the loss and the flag of NonFinite in one wait.
func TestLossAndNonFinite(t *testing.T) {
	b := device(t)
	e := newEnv(t)
	loss := e.values(kernels.F32, []float32{2.375}, 1)
	h := e.randn(kernels.CatGrads, kernels.F16, 1, 3, 5000)
	b.LossAndNonFinite(loss.g, []*kernels.Tensor{h.g}) // uploads the tensor table once (a synchronous copy)
	c0 := b.Counters()
	l, bad := b.LossAndNonFinite(loss.g, []*kernels.Tensor{h.g})
	if d := b.Counters().Sub(c0); l != 2.375 || bad || d.Syncs != 1 || d.Launches != 1 {
		t.Errorf("finite: loss %g, bad %v, counters %+v; want 2.375, false, 1 sync, 1 launch", l, bad, d)
	}
	v := download(b, h.g)
	v[12345] = float32(math.Inf(1))
	b.Upload(h.g, v)
	if l, bad = b.LossAndNonFinite(loss.g, []*kernels.Tensor{h.g}); l != 2.375 || !bad {
		t.Errorf("inf: loss %g, bad %v", l, bad)
	}
	if l, bad = b.LossAndNonFinite(loss.g, nil); l != 2.375 || bad {
		t.Errorf("no tensors: loss %g, bad %v (a stale flag?)", l, bad)
	}
	e.free(loss, h)
}

// The profiler times every public op once (nested ones inside the
// outermost), counts what each queued, and works eagerly and in a graph.
func TestProfileRecordsOps(t *testing.T) {
	b := device(t)
	e := newEnv(t)
	x := e.randn(kernels.CatActivations, kernels.F16, 1, 8, 16, 8, 8).g
	w := e.randn(kernels.CatParams, kernels.F16, 0.1, 32, 16, 3, 3).g
	y := b.New(kernels.CatActivations, kernels.F16, 8, 32, 8, 8)
	ops := func() {
		b.Conv2dForward(y, x, w, kernels.ConvParams{Stride: 1, Pad: 1})
		b.ReLUForward(y, y)
	}
	b.StartProfile()
	ops()
	recs, err := b.StopProfile()
	if err != nil || len(recs) != 2 || recs[0].Op != "Conv2dForward" || recs[1].Op != "ReLUForward" {
		t.Fatalf("eager records %+v, %v", recs, err)
	}
	if recs[0].MS <= 0 || recs[0].Launches < 1 || recs[1].Launches != 1 || recs[0].Key != "fp16[8 32 8 8] fp16[8 16 8 8] fp16[32 16 3 3]" {
		t.Errorf("eager records %+v", recs)
	}
	t.Logf("eager: %+v", recs)
	if err := b.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	b.StartProfile()
	ops()
	g, err := b.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if err := g.Launch(); err != nil {
		t.Fatal(err)
	}
	recs, err = b.StopProfile()
	if err != nil || len(recs) != 2 || !(recs[0].MS > 0) {
		t.Fatalf("graph records %+v, %v (external event nodes not timed?)", recs, err)
	}
	t.Logf("graph: %+v", recs)
	b.Free(x)
	b.Free(w)
	b.Free(y)
}

// The 16-byte loads of src/conv.cu's fp16/bf16 loader stage the same values
// in the same places as its element loads, and the dense GEMMs of 1x1 maps
// multiply the same tiles as the gather kernel, so a 16-byte aligned weight
// view (vecOK: the _vec entries; dense) and an unaligned one holding the
// same values (the element loads; the gather kernel) must agree bit for bit
// on every pass, split-K included.
func TestConvLoaderVersionsAgree(t *testing.T) {
	b := device(t)
	e := newEnv(t)
	cases := append(append([]convCase{}, convCases...), resnetConvs[1], resnetConvs[3], resnetConvs[6])
	for _, cc := range cases {
		for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
			cp := kernels.ConvParams{Stride: cc.stride, Pad: cc.pad}
			P, Q := convOut(cc)
			x := e.randn(kernels.CatActivations, dt, 1, cc.n, cc.c, cc.h, cc.w).g
			dy := e.randn(kernels.CatActivations, dt, 1, cc.n, cc.k, P, Q).g
			wv := e.normals(cc.k*cc.c*cc.r*cc.s, 0.2)
			var ref [3][]float32
			for _, off := range []int{0, 1} {
				wBase := b.New(kernels.CatParams, dt, off+len(wv))
				b.Upload(wBase, append(make([]float32, off), wv...))
				w := kernels.View(wBase, off, cc.k, cc.c, cc.r, cc.s)
				y := b.New(kernels.CatActivations, dt, cc.n, cc.k, P, Q)
				dx := b.New(kernels.CatActivations, dt, cc.n, cc.c, cc.h, cc.w)
				dw := b.New(kernels.CatGrads, dt, cc.k, cc.c, cc.r, cc.s)
				b.Conv2dForward(y, x, w, cp)
				b.Conv2dBackward(dx, dw, dy, x, w, cp)
				got := [3][]float32{download(b, y), download(b, dx), download(b, dw)}
				for i, g := range got {
					if off == 0 {
						ref[i] = g
						continue
					}
					for j := range g {
						if math.Float32bits(g[j]) != math.Float32bits(ref[i][j]) {
							t.Errorf("%+v %v: %s with element loads differs from 16-byte loads at [%d]: %g vs %g",
								cc, dt, []string{"y", "dx", "dw"}[i], j, g[j], ref[i][j])
							break
						}
					}
				}
				b.Free(y)
				b.Free(dx)
				b.Free(dw)
				b.Free(wBase)
			}
			b.Free(x)
			b.Free(dy)
		}
	}
}
