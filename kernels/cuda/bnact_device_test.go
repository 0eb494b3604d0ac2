package cuda

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/fusetest"
	"resnetlab/model"
)

// The fused BN+ReLU(+add) kernels give exactly what bn_fwd_*, add,
// relu_fwd and relu_bwd, bn_bwd give: outputs, running and saved
// statistics and gradients bit for bit, in fp32, fp16 and bf16, train and
// eval, with and without the residual and the ds output. The same checks
// run on the CPU backend in CI (kernels/cpu).
func TestBNActMatchesSeparate(t *testing.T) {
	b := device(t)
	cases := append(fusetest.BNActCases(),
		fusetest.BNActCase{DType: kernels.F16, Training: true, Residual: true, N: 100, C: 64, H: 16, W: 16}, // 1024 threads
		fusetest.BNActCase{DType: kernels.F16, Training: true, Residual: false, N: 100, C: 512, H: 2, W: 2})
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { fusetest.CheckBNAct(t, b, b, c) })
	}
}

// A ResNet-18 training step with BN+ReLU(+add) fused computes exactly what
// the separate kernels compute: three steps of the test net, fused and
// not, from the same initial weights and batch, give the same loss, fp32
// master weights and gradients bit for bit.
func TestBNActResNet18Step(t *testing.T) {
	b := device(t)
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
		fu, sep := newNetWith(b, dt, 16, b), newNetWith(b, dt, 16, nil)
		fu.data()
		sep.data()
		for step := 1; step <= 3; step++ {
			fu.step()
			sep.step()
			fu.hp.Step++
			sep.hp.Step++
			if lf, ls := fu.lossValue(), sep.lossValue(); math.Float32bits(lf) != math.Float32bits(ls) {
				t.Fatalf("%v step %d: loss %v fused, %v separate", dt, step, lf, ls)
			}
			for i := range fu.master {
				if !sameBits32(download(b, fu.master[i]), download(b, sep.master[i])) ||
					!sameBits32(download(b, fu.grads[i]), download(b, sep.grads[i])) {
					t.Fatalf("%v step %d: parameter %d %v or its gradient differs fused vs separate", dt, step, i, fu.master[i])
				}
			}
		}
	}
}

func sameBits32(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// separateOps hides the backend's fused ops, so a model on it runs BN, add
// and ReLU as separate kernels.
type separateOps struct{ kernels.Backend }

// The real model (model/) on the GPU trains bit-identically with the fused
// kernels and without: three Adam steps of a width-16 ResNet-18 in fp32
// and fp16, every state-dict entry (running statistics included) and
// gradient, the loss and the eval logits.
func TestBNActModelStep(t *testing.T) {
	b := device(t)
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
		cfg := model.Config{Width: 16, InChannels: 3, NumClasses: 10, DType: dt, Seed: 3}
		var runs [2]modelRun
		for i, be := range []kernels.Backend{b, separateOps{b}} {
			runs[i] = trainModel(t, be, cfg)
		}
		if kernels.FusedBNOf(separateOps{b}) != nil || kernels.FusedBNOf(b) == nil {
			t.Fatal("the fused ops are not offered exactly by the bare backend")
		}
		for k := range runs[0].vals {
			if !sameBits32(runs[0].vals[k], runs[1].vals[k]) {
				t.Fatalf("%v: %s differs between fused and separate kernels", dt, runs[0].names[k])
			}
		}
	}
}

// modelRun is what trainModel read back: named tensors as floats.
type modelRun struct {
	names []string
	vals  [][]float32
}

func (r *modelRun) add(name string, v []float32) {
	r.names, r.vals = append(r.names, name), append(r.vals, v)
}

func trainModel(t *testing.T, be kernels.Backend, cfg model.Config) modelRun {
	t.Helper()
	m := model.NewResNet18(be, cfg)
	ce, opt := model.NewCrossEntropy(be), model.NewAdam()
	defer func() { opt.Free(); ce.Free(); m.Free() }()
	rng := rand.New(rand.NewSource(9))
	img, lab := make([]float32, 8*3*32*32), make([]float32, 8)
	for i := range img {
		img[i] = rng.Float32()
	}
	for i := range lab {
		lab[i] = float32(i)
	}
	x := be.New(kernels.CatData, cfg.DType, 8, 3, 32, 32)
	labels := be.New(kernels.CatData, kernels.F32, 8)
	defer be.Free(x)
	defer be.Free(labels)
	be.Upload(x, img)
	be.Upload(labels, lab)
	var r modelRun
	for step := 0; step < 3; step++ {
		_, dl := ce.Forward(m.Forward(x, true), labels, 1, true)
		m.Backward(dl)
		opt.Step(be, m.Params(), 1e-3, 1)
		r.add(fmt.Sprintf("loss %d", step), []float32{ce.Value()})
	}
	for _, p := range m.Params() {
		r.add(p.Name+" grad", download(be, p.G))
	}
	for _, e := range m.StateDict() {
		r.add(e.Name, e.Data)
	}
	r.add("eval logits", download(be, m.Forward(x, false)))
	return r
}
