package model

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"resnetlab/kernels"
)

// separateOps hides the CPU backend's fused BN+ReLU ops (embedding the
// interface promotes only kernels.Backend's methods), so a model on it
// runs BN, add and ReLU as separate ops.
type separateOps struct{ kernels.Backend }

// fusedPair is one model on the fused CPU backend and one on the same
// backend with the fusion hidden, from the same seed.
func fusedPair(t *testing.T, dt kernels.DType) (fused, sep *trainer) {
	t.Helper()
	be := newBackend(t)
	if kernels.FusedBNOf(be) == nil {
		t.Fatal("cpu backend does not offer kernels.FusedBN")
	}
	if kernels.FusedBNOf(separateOps{be}) != nil {
		t.Fatal("separateOps still exposes the fused ops")
	}
	cfg := smallConfig(8, 11)
	cfg.DType = dt
	return newTrainer(be, cfg), newTrainer(separateOps{be}, cfg)
}

// imagesOf is a batch of n random images in dtype dt with labels.
func imagesOf(be kernels.Backend, dt kernels.DType, seed uint64, n int) (x, labels *kernels.Tensor) {
	xf, labels := batch(be, seed, n)
	x = be.New(kernels.CatData, dt, n, 3, 32, 32)
	be.Copy(x, xf)
	be.Free(xf)
	return x, labels
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) })
}

// TestFusedBNMatchesSeparateOps: a ResNet-18 whose BN+ReLU(+add) run fused
// trains exactly like one running the separate ops, in every dtype: every
// state-dict entry (running statistics and num_batches_tracked included),
// gradient, optimizer moment, loss, input gradient and eval output is
// bit-identical after each of three steps, and the hooks see the same
// sequence of layers.
func TestFusedBNMatchesSeparateOps(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			fu, sep := fusedPair(t, dt)
			defer fu.free()
			defer sep.free()
			hf, hs := &recorder{}, &recorder{}
			fu.m.SetHooks(hf)
			sep.m.SetHooks(hs)
			x, labels := imagesOf(fu.be, dt, 3, 4)
			for step := 1; step <= 3; step++ {
				lf, ls := fu.step(x, labels, 2e-3), sep.step(x, labels, 2e-3)
				if math.Float32bits(lf) != math.Float32bits(ls) {
					t.Fatalf("step %d: loss %v fused, %v separate", step, lf, ls)
				}
				compareSnapshots(t, fmt.Sprintf("step %d", step), fu, sep)
			}
			if !slices.Equal(hf.log, hs.log) {
				t.Errorf("hook sequences differ:\nfused    %v\nseparate %v", hf.log, hs.log)
			}
			compareInputGrad(t, fu, sep, x, labels)
			xe, _ := imagesOf(fu.be, dt, 4, 5)
			ef, es := download(fu.be, fu.m.Forward(xe, false)), download(sep.be, sep.m.Forward(xe, false))
			if !bitsEqual(ef, es) {
				t.Errorf("eval logits differ: fused %v, separate %v", ef, es)
			}
		})
	}
}

func compareSnapshots(t *testing.T, when string, fu, sep *trainer) {
	t.Helper()
	a, b := fu.snapshot(), sep.snapshot()
	for i := range a {
		if !bitsEqual(a[i], b[i]) {
			t.Fatalf("%s: state entry %d differs between fused and separate ops", when, i)
		}
	}
	da, db := fu.m.StateDict(), sep.m.StateDict()
	for i := range da {
		if !slices.Equal(da[i].Int64, db[i].Int64) {
			t.Fatalf("%s: %s = %v fused, %v separate", when, da[i].Name, da[i].Int64, db[i].Int64)
		}
	}
}

// compareInputGrad checks BackwardInput's image gradient, which runs
// through every fused backward including the stem's.
func compareInputGrad(t *testing.T, fu, sep *trainer, x, labels *kernels.Tensor) {
	t.Helper()
	var dx [2][]float32
	for i, tr := range []*trainer{fu, sep} {
		logits := tr.m.Forward(x, true)
		_, dl := tr.ce.Forward(logits, labels, 1, true)
		dx[i] = download(tr.be, tr.m.BackwardInput(dl))
	}
	if !bitsEqual(dx[0], dx[1]) {
		t.Errorf("input gradients differ between fused and separate ops")
	}
	nz := 0
	for _, v := range dx[0] {
		if v != 0 {
			nz++
		}
	}
	if nz == 0 {
		t.Errorf("input gradient is all zero: the comparison proves nothing")
	}
}
