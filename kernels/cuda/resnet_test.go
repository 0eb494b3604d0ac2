package cuda

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"testing"

	"resnetlab/kernels"
)

// A ResNet-18 training step written directly against the backend, for the
// step benchmark and the graph tests (the real model lives in model/).

// act is an activation and its gradient.
type act struct{ x, g *kernels.Tensor }

type net struct {
	b      *Backend
	fused  kernels.FusedBN // BN+ReLU(+add) fused when not nil, as model/ does
	dt     kernels.DType
	n      int
	rng    *rand.Rand
	fwd    []func()
	bwd    []func() // run in reverse
	params []*kernels.Tensor
	grads  []*kernels.Tensor
	master []*kernels.Tensor // fp32 copies Adam updates (== params in fp32)
	copies []*kernels.Tensor // params[i] where it is not master[i], else nil
	m, v   []*kernels.Tensor
	images *kernels.Tensor
	labels *kernels.Tensor
	loss   *kernels.Tensor
	hp     kernels.AdamParams
}

func (nt *net) newAct(shape ...int) *act {
	return &act{nt.b.New(kernels.CatActivations, nt.dt, shape...), nt.b.New(kernels.CatActivations, nt.dt, shape...)}
}

// param makes a trainable tensor of dtype dt initialised N(0, std^2) (or to
// constant c when std is 0) with its gradient and Adam state.
func (nt *net) param(dt kernels.DType, std, c float64, shape ...int) (*kernels.Tensor, *kernels.Tensor) {
	b := nt.b
	m := b.New(kernels.CatParams, kernels.F32, shape...)
	v := make([]float32, m.Len())
	for i := range v {
		v[i] = float32(nt.rng.NormFloat64()*std + c)
	}
	b.Upload(m, v)
	p := m
	if dt != kernels.F32 {
		p = b.New(kernels.CatParams, dt, shape...)
		b.Copy(p, m)
	}
	g := b.New(kernels.CatGrads, dt, shape...)
	nt.params, nt.grads, nt.master = append(nt.params, p), append(nt.grads, g), append(nt.master, m)
	var cp *kernels.Tensor
	if p != m {
		cp = p
	}
	nt.copies = append(nt.copies, cp)
	nt.m = append(nt.m, b.New(kernels.CatOptState, kernels.F32, shape...))
	nt.v = append(nt.v, b.New(kernels.CatOptState, kernels.F32, shape...))
	return p, g
}

func (nt *net) conv(in *act, cout, k, stride, pad int) *act {
	cin, h, w := in.x.Shape[1], in.x.Shape[2], in.x.Shape[3]
	wt, dw := nt.param(nt.dt, math.Sqrt(2/float64(cout*k*k)), 0, cout, cin, k, k)
	p := kernels.ConvParams{Stride: stride, Pad: pad}
	out := nt.newAct(nt.n, cout, kernels.OutSize(h, k, stride, pad), kernels.OutSize(w, k, stride, pad))
	nt.fwd = append(nt.fwd, func() { nt.b.Conv2dForward(out.x, in.x, wt, p) })
	nt.bwd = append(nt.bwd, func() { nt.b.Conv2dBackward(in.g, dw, out.g, in.x, wt, p) })
	return out
}

// bnLayer is one batch norm's parameters and statistics.
type bnLayer struct {
	gamma, dg, beta, db, rm, rv, sm, si *kernels.Tensor
}

func (nt *net) newBN(c int) *bnLayer {
	l := &bnLayer{}
	l.gamma, l.dg = nt.param(kernels.F32, 0, 1, c)
	l.beta, l.db = nt.param(kernels.F32, 0, 0, c)
	b := nt.b
	l.rm, l.rv = b.New(kernels.CatParams, kernels.F32, c), b.New(kernels.CatParams, kernels.F32, c)
	b.Fill(l.rv, 1)
	l.sm, l.si = b.New(kernels.CatActivations, kernels.F32, c), b.New(kernels.CatActivations, kernels.F32, c)
	return l
}

func (nt *net) bn(in *act) *act {
	l, b := nt.newBN(in.x.Shape[1]), nt.b
	out := nt.newAct(in.x.Shape...)
	nt.fwd = append(nt.fwd, func() { b.BatchNormForward(out.x, in.x, l.gamma, l.beta, l.rm, l.rv, l.sm, l.si, true, 0.1, 1e-5) })
	nt.bwd = append(nt.bwd, func() { b.BatchNormBackward(in.g, l.dg, l.db, out.g, in.x, l.gamma, l.sm, l.si) })
	return out
}

// bnRelu is relu(bn(in)), fused when the net fuses.
func (nt *net) bnRelu(in *act) *act {
	if nt.fused == nil {
		return nt.relu(nt.bn(in))
	}
	return nt.bnAct(in, nil, nil)
}

// bnAct is relu(bn(in) + res) (res nil: relu(bn(in))) with the fused ops;
// its backward also writes the masked gradient into ds when not nil.
func (nt *net) bnAct(in *act, res, ds *kernels.Tensor) *act {
	l, f := nt.newBN(in.x.Shape[1]), nt.fused
	out := nt.newAct(in.x.Shape...)
	nt.fwd = append(nt.fwd, func() {
		f.BatchNormActForward(out.x, in.x, res, l.gamma, l.beta, l.rm, l.rv, l.sm, l.si, true, 0.1, 1e-5)
	})
	nt.bwd = append(nt.bwd, func() { f.BatchNormActBackward(in.g, ds, l.dg, l.db, out.g, out.x, in.x, l.gamma, l.sm, l.si) })
	return out
}

func (nt *net) relu(in *act) *act {
	out := nt.newAct(in.x.Shape...)
	nt.fwd = append(nt.fwd, func() { nt.b.ReLUForward(out.x, in.x) })
	nt.bwd = append(nt.bwd, func() { nt.b.ReLUBackward(in.g, out.g, out.x) })
	return out
}

// block is a BasicBlock. Its input feeds two branches, each with its own
// gradient buffer; the last backward op adds them into in.g.
func (nt *net) block(in *act, cout, stride int) *act {
	main, short := &act{x: in.x}, &act{x: in.x}
	main.g = nt.b.New(kernels.CatActivations, nt.dt, in.x.Shape...)
	b := nt.b
	nt.bwd = append(nt.bwd, func() {
		if in.g != nil {
			b.Add(in.g, main.g, short.g)
		}
	})
	if nt.fused != nil {
		return nt.blockFused(in, main, short, cout, stride)
	}
	z := nt.bn(nt.conv(nt.relu(nt.bn(nt.conv(main, cout, 3, stride, 1))), cout, 3, 1, 1))
	s := short
	if stride != 1 || in.x.Shape[1] != cout {
		short.g = nt.b.New(kernels.CatActivations, nt.dt, in.x.Shape...)
		s = nt.bn(nt.conv(short, cout, 1, stride, 0))
	}
	sum := nt.newAct(z.x.Shape...)
	z.g, s.g = sum.g, sum.g // the sum's gradient flows unchanged into both branches
	nt.fwd = append(nt.fwd, func() { b.Add(sum.x, z.x, s.x) })
	return nt.relu(sum)
}

// blockFused is block with BN+ReLU(+add) fused, layers (and parameters)
// in the same order: bn2 adds the identity, or, with a downsample, the
// shortcut's BN adds bn2's output; the BN that adds writes the masked
// gradient (the sum's) that both branches read.
func (nt *net) blockFused(in, main, short *act, cout, stride int) *act {
	z := nt.conv(nt.bnRelu(nt.conv(main, cout, 3, stride, 1)), cout, 3, 1, 1)
	ds := nt.b.New(kernels.CatActivations, nt.dt, z.x.Shape...)
	if stride == 1 && in.x.Shape[1] == cout {
		short.g = ds
		return nt.bnAct(z, in.x, ds)
	}
	z2 := nt.bn(z)
	z2.g = ds
	short.g = nt.b.New(kernels.CatActivations, nt.dt, in.x.Shape...)
	return nt.bnAct(nt.conv(short, cout, 1, stride, 0), z2.x, ds)
}

// newNet builds ResNet-18 (10 classes) for n images of 3x32x32 in dtype dt,
// with BN+ReLU fused where the backend offers it.
func newNet(b *Backend, dt kernels.DType, n int) *net {
	return newNetWith(b, dt, n, kernels.FusedBNOf(b))
}

// newNetWith is newNet with the fused ops f (nil: separate ops).
func newNetWith(b *Backend, dt kernels.DType, n int, f kernels.FusedBN) *net {
	nt := &net{b: b, dt: dt, n: n, fused: f, rng: rand.New(rand.NewSource(5)),
		hp: kernels.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1, GradScale: 1}}
	nt.images = b.New(kernels.CatData, dt, n, 3, 32, 32)
	nt.labels = b.New(kernels.CatData, kernels.F32, n)
	nt.loss = b.New(kernels.CatActivations, kernels.F32, 1)
	// Closures capture variables, so each layer's input gets its own.
	stem := nt.bnRelu(nt.conv(&act{x: nt.images}, 64, 7, 2, 3))
	pool := nt.newAct(n, 64, 8, 8)
	pp := kernels.PoolParams{K: 3, Stride: 2, Pad: 1}
	nt.fwd = append(nt.fwd, func() { b.MaxPoolForward(pool.x, stem.x, pp) })
	nt.bwd = append(nt.bwd, func() { b.MaxPoolBackward(stem.g, pool.g, stem.x, pp) })
	x := pool
	for i, c := range []int{64, 128, 256, 512} {
		st := 2
		if i == 0 {
			st = 1
		}
		x = nt.block(nt.block(x, c, st), c, 1)
	}
	last, avg := x, nt.newAct(n, 512)
	nt.fwd = append(nt.fwd, func() { b.GlobalAvgPoolForward(avg.x, last.x) })
	nt.bwd = append(nt.bwd, func() { b.GlobalAvgPoolBackward(last.g, avg.g) })
	fw, dfw := nt.param(dt, 1/math.Sqrt(512), 0, 10, 512)
	fb, dfb := nt.param(dt, 0, 0, 10)
	logits := nt.newAct(n, 10)
	nt.fwd = append(nt.fwd, func() { b.LinearForward(logits.x, avg.x, fw, fb) })
	nt.bwd = append(nt.bwd, func() { b.LinearBackward(avg.g, dfw, dfb, logits.g, avg.x, fw) })
	nt.fwd = append(nt.fwd, func() { b.SoftmaxCrossEntropy(nt.loss, logits.g, logits.x, nt.labels, 1) })
	return nt
}

// data uploads a fixed random batch.
func (nt *net) data() {
	img := make([]float32, nt.images.Len())
	for i := range img {
		img[i] = nt.rng.Float32()
	}
	lab := make([]float32, nt.n)
	for i := range lab {
		lab[i] = float32(nt.rng.Intn(10))
	}
	nt.b.Upload(nt.images, img)
	nt.b.Upload(nt.labels, lab)
}

// step queues forward, backward, Adam and (mixed precision) the copies of
// the fp32 masters into the compute weights: written by Adam itself where
// the PTX has adam_copy, else one Copy per weight (AdamStepCopy's fallback).
func (nt *net) step() {
	for _, f := range nt.fwd {
		f()
	}
	for i := len(nt.bwd) - 1; i >= 0; i-- {
		nt.bwd[i]()
	}
	kernels.AdamStepCopy(nt.b, nt.master, nt.grads, nt.m, nt.v, nt.copies, nt.hp)
}

func (nt *net) lossValue() float32 {
	v := make([]float32, 1)
	nt.b.Download(nt.loss, v)
	return v[0]
}

// Training on one fixed batch must drive the loss down, eagerly and through
// a captured graph, in fp32 (TF32 convolutions) and fp16.
func TestResNet18Trains(t *testing.T) {
	b := device(t)
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
		nt := newNet(b, dt, 16)
		nt.data()
		nt.step()
		first := nt.lossValue()
		for i := 0; i < 10; i++ {
			nt.hp.Step++
			nt.step()
		}
		eager := nt.lossValue()
		if err := b.BeginCapture(); err != nil {
			t.Fatal(err)
		}
		nt.step()
		g, err := b.EndCapture()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			if err := g.Launch(); err != nil {
				t.Fatal(err)
			}
		}
		graph := nt.lossValue()
		g.Destroy()
		t.Logf("%v: loss %.4f -> %.4f after 10 eager steps -> %.4f after 10 graph replays", dt, first, eager, graph)
		if !(first > 2 && eager < first*0.8 && graph < eager) {
			t.Errorf("%v: loss did not fall: %.4f -> %.4f -> %.4f", dt, first, eager, graph)
		}
	}
}

// A replayed graph computes exactly what the eager ops compute, and scratch
// blocks it freed during capture are not handed to later tensors.
func TestGraphReplayMatchesEager(t *testing.T) {
	e := newEnv(t)
	g := e.g
	cp := kernels.ConvParams{Stride: 1, Pad: 1}
	pp := kernels.PoolParams{K: 3, Stride: 2, Pad: 1}
	x := e.randn(kernels.CatActivations, kernels.F32, 1, 8, 16, 8, 8).g
	w := e.randn(kernels.CatParams, kernels.F32, 0.1, 64, 16, 3, 3).g
	y := g.New(kernels.CatActivations, kernels.F32, 8, 64, 8, 8)
	dy := e.randn(kernels.CatActivations, kernels.F32, 1, 8, 64, 4, 4).g
	dx := g.New(kernels.CatActivations, kernels.F32, 8, 64, 8, 8)
	dw := g.New(kernels.CatGrads, kernels.F32, 64, 16, 3, 3)
	ops := func() {
		g.Conv2dForward(y, x, w, cp)
		g.ReLUForward(y, y)
		g.MaxPoolBackward(dx, dy, y, pp) // uses a scratch index buffer
		g.Conv2dBackward(nil, dw, dx, x, w, cp)
	}
	ops()
	wantY, wantDW := download(g, y), download(g, dw)
	g.Fill(y, 0)
	g.Fill(dw, 0)
	if err := g.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	ops()
	gr, err := g.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Destroy()
	if s := download(g, dw); relErr(s, make([]float32, len(s))) != 0 {
		t.Fatal("capturing ran the ops")
	}
	// Same size class as the pool's index scratch (8*64*4*4 int32).
	probe := g.New(kernels.CatData, kernels.F32, 8*64*4*4)
	g.Fill(probe, 7)
	for i := 0; i < 2; i++ {
		if err := gr.Launch(); err != nil {
			t.Fatal(err)
		}
	}
	if got := download(g, y); relErr(got, wantY) != 0 {
		t.Errorf("graph y differs from eager: %.3g", relErr(got, wantY))
	}
	if got := download(g, dw); relErr(got, wantDW) != 0 {
		t.Errorf("graph dw differs from eager: %.3g", relErr(got, wantDW))
	}
	for i, v := range download(g, probe) {
		if v != 7 {
			t.Fatalf("graph replay overwrote a tensor allocated after capture at [%d]: %g", i, v)
		}
	}
}

// warmNet is the test net at batch 100 with its data and three steps
// behind it (module loads, allocations and tuning out of the way), and the
// name benchmarks give its precision: fp32 convolutions run as TF32.
func warmNet(b *Backend, dt kernels.DType) (*net, string) {
	nt := newNet(b, dt, 100)
	nt.data()
	for i := 0; i < 3; i++ {
		nt.step()
	}
	if dt == kernels.F32 {
		return nt, "tf32"
	}
	return nt, dt.String()
}

// BenchmarkResNet18Step times one training step (forward, backward, Adam)
// at batch 100, eagerly and as a CUDA graph replay; ms/step is device time.
func BenchmarkResNet18Step(bm *testing.B) {
	b := device(bm)
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
		nt, name := warmNet(b, dt)
		bm.Run(name+"/eager", func(bm *testing.B) {
			c0 := b.Counters()
			start := b.Record()
			for i := 0; i < bm.N; i++ {
				nt.step()
			}
			ms := b.Elapsed(start, b.Record())
			c := b.Counters().Sub(c0)
			bm.ReportMetric(float64(ms)/float64(bm.N), "ms/step")
			bm.ReportMetric(float64(c.Launches)/float64(bm.N), "launches/step")
			bm.ReportMetric(float64(c.Copies)/float64(bm.N), "copies/step")
		})
		if err := b.BeginCapture(); err != nil {
			bm.Fatal(err)
		}
		nt.step()
		g, err := b.EndCapture()
		if err != nil {
			bm.Fatal(err)
		}
		bm.Run(name+"/graph", func(bm *testing.B) {
			_ = g.Launch()
			start := b.Record()
			for i := 0; i < bm.N; i++ {
				if err := g.Launch(); err != nil {
					bm.Fatal(err)
				}
			}
			ms := b.Elapsed(start, b.Record())
			bm.ReportMetric(float64(ms)/float64(bm.N), "ms/step")
		})
		g.Destroy()
		// Forward alone, for the step's split between the passes.
		if err := b.BeginCapture(); err != nil {
			bm.Fatal(err)
		}
		for _, f := range nt.fwd {
			f()
		}
		if g, err = b.EndCapture(); err != nil {
			bm.Fatal(err)
		}
		bm.Run(name+"/graph-forward", func(bm *testing.B) {
			_ = g.Launch()
			start := b.Record()
			for i := 0; i < bm.N; i++ {
				_ = g.Launch()
			}
			bm.ReportMetric(float64(b.Elapsed(start, b.Record()))/float64(bm.N), "ms/step")
		})
		g.Destroy()
		if l := nt.lossValue(); math.IsNaN(float64(l)) {
			bm.Errorf("%s: loss is NaN after the benchmark", name)
		}
	}
}

// resnetConvs are the distinct convolutions of ResNet-18 on 32x32 inputs
// at batch 100 (input C,H,W; output channels; kernel; stride; pad).
var resnetConvs = []convCase{
	{100, 3, 32, 32, 64, 7, 7, 2, 3},
	{100, 64, 8, 8, 64, 3, 3, 1, 1},
	{100, 64, 8, 8, 128, 3, 3, 2, 1},
	{100, 128, 4, 4, 128, 3, 3, 1, 1},
	{100, 64, 8, 8, 128, 1, 1, 2, 0},
	{100, 128, 4, 4, 256, 3, 3, 2, 1},
	{100, 256, 2, 2, 256, 3, 3, 1, 1},
	{100, 128, 4, 4, 256, 1, 1, 2, 0},
	{100, 256, 2, 2, 512, 3, 3, 2, 1},
	{100, 512, 1, 1, 512, 3, 3, 1, 1},
	{100, 256, 2, 2, 512, 1, 1, 2, 0},
}

// BenchmarkConvResNet18 times forward, data gradient and weight gradient of
// each ResNet-18 convolution at batch 100 (device time per call).
func BenchmarkConvResNet18(bm *testing.B) {
	b := device(bm)
	for _, pr := range []convPrec{{kernels.F32, true, 0}, {kernels.F16, false, 0}} {
		for _, cc := range resnetConvs {
			cp := kernels.ConvParams{Stride: cc.stride, Pad: cc.pad}
			P, Q := kernels.OutSize(cc.h, cc.r, cc.stride, cc.pad), kernels.OutSize(cc.w, cc.s, cc.stride, cc.pad)
			x := b.New(kernels.CatActivations, pr.dt, cc.n, cc.c, cc.h, cc.w)
			w := b.New(kernels.CatParams, pr.dt, cc.k, cc.c, cc.r, cc.s)
			y := b.New(kernels.CatActivations, pr.dt, cc.n, cc.k, P, Q)
			for _, t := range []*kernels.Tensor{x, w, y} {
				b.Fill(t, 0.5)
			}
			dx, dw := b.New(kernels.CatActivations, pr.dt, x.Shape...), b.New(kernels.CatGrads, pr.dt, w.Shape...)
			flop := 2 * float64(cc.n*P*Q*cc.k*cc.c*cc.r*cc.s)
			tag := pr.String() + "/" + convName(cc)
			for _, pass := range []struct {
				name string
				run  func()
			}{
				{"fwd", func() { b.Conv2dForward(y, x, w, cp) }},
				// The passes alone go through the internal gemm, so they bind
				// the context themselves (sub-benchmarks run on other threads).
				{"dgrad", func() {
					defer b.bind()()
					b.gemm(modeBwdData, convShapeOf("bench", x, w, cp), y.Dev, w.Dev, dx, nil, false)
				}},
				{"wgrad", func() {
					defer b.bind()()
					b.gemm(modeBwdWeight, convShapeOf("bench", x, w, cp), y.Dev, x.Dev, dw, nil, false)
				}},
			} {
				if pass.name == "dgrad" && cc.c == 3 {
					continue // the stem's input needs no gradient
				}
				bm.Run(tag+"/"+pass.name, func(bm *testing.B) {
					pass.run()
					start := b.Record()
					for i := 0; i < bm.N; i++ {
						pass.run()
					}
					ms := float64(b.Elapsed(start, b.Record())) / float64(bm.N)
					bm.ReportMetric(ms*1000, "us/call")
					bm.ReportMetric(flop/ms/1e9, "TFLOP/s")
				})
			}
			for _, t := range []*kernels.Tensor{x, w, y, dx, dw} {
				b.Free(t)
			}
		}
	}
}

func convName(c convCase) string {
	return name(c.c, "x", c.h, "x", c.w, "-k", c.k, "-", c.r, "x", c.s, "s", c.stride)
}

// BenchmarkProfileResNet18 prints where one training step of the test net
// (batch 100, fp32 with TF32 convolutions and fp16) spends its device
// time: per op kind and per op and shape, eagerly (event brackets include
// any wait for the host's launches) and in a CUDA graph replay (pure device
// time). Run it with -test.bench ProfileResNet18 -test.benchtime 1x.
func BenchmarkProfileResNet18(bm *testing.B) {
	b := device(bm)
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
		nt, name := warmNet(b, dt)
		const steps = 10
		c0 := b.Counters()
		b.StartProfile()
		for i := 0; i < steps; i++ {
			nt.step()
		}
		recs, err := b.StopProfile()
		if err != nil {
			bm.Fatal(err)
		}
		c := b.Counters().Sub(c0)
		fmt.Printf("\n== %s eager: %.1f launches, %.1f copies, %.1f syncs per step (bn_act %v)\n", name,
			float64(c.Launches)/steps, float64(c.Copies)/steps, float64(c.Syncs-1)/steps, nt.fused != nil)
		kernels.WriteProfile(os.Stdout, name+" eager by op", kernels.Aggregate(recs, false), steps, 0)
		if err := b.BeginCapture(); err != nil {
			bm.Fatal(err)
		}
		b.StartProfile()
		nt.step()
		g, err := b.EndCapture()
		if err != nil {
			bm.Fatal(err)
		}
		_ = g.Launch()
		if err := g.Launch(); err != nil {
			bm.Fatal(err)
		}
		recs, err = b.StopProfile()
		g.Destroy()
		if err != nil {
			bm.Fatal(err)
		}
		fmt.Printf("\n== %s graph replay\n", name)
		kernels.WriteProfile(os.Stdout, name+" graph by op", kernels.Aggregate(recs, false), 1, 0)
		kernels.WriteProfile(os.Stdout, name+" graph by op and shape", kernels.Aggregate(recs, true), 1, 60)
	}
}
