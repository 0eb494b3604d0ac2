package model

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"resnetlab/kernels"
)

// Layer tests: analytic gradients of every layer type against central
// finite differences of L = sum(y * R), R fixed random, computed in float64
// on the host from the float32 forward. Perturbations are 1e-3 of the
// tensor's RMS. Accepted: |analytic - measured| <= 2% of measured + 2e-5
// (float32 rounding of L is ~1e-6).
var layerTol = fdTol{rel: 0.02, abs: 2e-5}

// checkModule runs the finite-difference checks on the input and every
// parameter of mod for input x (host values xHost, which may be tuned to
// keep kinks of ReLU/max away from the perturbation).
func checkModule(t *testing.T, be kernels.Backend, mod Module, xHost []float32, shape ...int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	x := be.New(kernels.CatData, kernels.F32, shape...)
	defer be.Free(x)
	var r []float32
	var rT *kernels.Tensor
	loss := func() float64 {
		be.Upload(x, xHost) // in-place layers overwrite x
		y := mod.Forward(x, true)
		if r == nil {
			r = randNormal(rng, y.Len(), 1)
			rT = upload(be, kernels.CatData, y.DType, r, y.Shape...)
		}
		return dot(download(be, y), r)
	}
	loss()
	dx := mod.Backward(rT)
	defer be.Free(rT)
	targets := []gradTarget{{
		name: mod.Name() + ".input",
		get:  func() []float32 { return append([]float32(nil), xHost...) },
		set:  func(v []float32) { copy(xHost, v) },
		grad: download(be, dx),
	}}
	for _, p := range mod.Params() {
		targets = append(targets, paramTarget(be, p))
	}
	for _, tg := range targets {
		checkDirectional(t, rng, loss, tg, 1e-3, layerTol)
		checkElements(t, rng, loss, tg, 4, 1e-3, layerTol)
	}
}

// initParams fills every parameter with N(0, 0.5) (BN gamma around 1).
func initParams(be kernels.Backend, rng *rand.Rand, ps []*Param) {
	for _, p := range ps {
		v := randNormal(rng, p.W.Len(), 0.5)
		if p.W.DType == kernels.F32 && len(p.W.Shape) == 1 && strings.HasSuffix(p.Name, ".weight") {
			for i := range v {
				v[i] += 1
			}
		}
		be.Upload(p.W, v)
	}
}

func TestConv2dGradients(t *testing.T) {
	be := newBackend(t)
	for _, c := range []struct{ in, out, k, stride, pad, hw int }{
		{3, 4, 3, 1, 1, 6}, {3, 5, 3, 2, 1, 7}, {2, 3, 7, 2, 3, 9}, {4, 6, 1, 2, 0, 6},
	} {
		t.Run(fmt.Sprintf("k%d_s%d_p%d", c.k, c.stride, c.pad), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(c.k)))
			conv := NewConv2d(be, "conv", kernels.F32, c.in, c.out, c.k, c.stride, c.pad)
			initParams(be, rng, conv.Params())
			x := randNormal(rng, 2*c.in*c.hw*c.hw, 1)
			checkModule(t, be, conv, x, 2, c.in, c.hw, c.hw)
		})
	}
}

func TestBatchNormGradients(t *testing.T) {
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(2, 2))
	bn := NewBatchNorm2d(be, "bn", 4)
	initParams(be, rng, bn.Params())
	x := randNormal(rng, 3*4*5*5, 2)
	for i := range x {
		x[i] += float32(i % 4) // per-position offsets so channels differ in mean
	}
	checkModule(t, be, bn, x, 3, 4, 5, 5)
}

func TestReLUGradients(t *testing.T) {
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(3, 3))
	x := randNormal(rng, 2*3*4*4, 1)
	for i, v := range x { // keep every value 0.05 away from the kink
		if v >= 0 {
			x[i] = v + 0.05
		} else {
			x[i] = v - 0.05
		}
	}
	checkModule(t, be, NewReLU(be, "relu"), x, 2, 3, 4, 4)
}

func TestMaxPoolGradients(t *testing.T) {
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(4, 4))
	// Distinct values 0.1 apart (a permutation), so no perturbation of
	// 1e-3*RMS changes any window's argmax.
	n := 2 * 3 * 7 * 7
	x := make([]float32, n)
	for i, p := range rng.Perm(n) {
		x[i] = float32(p)*0.1 - float32(n)*0.05
	}
	checkModule(t, be, NewMaxPool2d(be, "maxpool", 3, 2, 1), x, 2, 3, 7, 7)
}

func TestAvgPoolGradients(t *testing.T) {
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(5, 5))
	checkModule(t, be, NewAvgPool(be, "avgpool"), randNormal(rng, 2*3*4*4, 1), 2, 3, 4, 4)
}

func TestLinearGradients(t *testing.T) {
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(6, 6))
	fc := NewLinear(be, "fc", kernels.F32, 6, 5)
	initParams(be, rng, fc.Params())
	checkModule(t, be, fc, randNormal(rng, 4*6, 1), 4, 6)
}

func TestBasicBlockGradients(t *testing.T) {
	be := newBackend(t)
	for _, c := range []struct {
		name            string
		in, out, stride int
		wantDownsample  bool
	}{
		{"identity", 4, 4, 1, false},
		{"downsample", 4, 8, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(8, uint64(c.out)))
			b := NewBasicBlock(be, "layer2.0", kernels.F32, c.in, c.out, c.stride)
			if (b.DownConv != nil) != c.wantDownsample {
				t.Fatalf("downsample present = %v, want %v", b.DownConv != nil, c.wantDownsample)
			}
			initParams(be, rng, b.Params())
			checkModule(t, be, b, randNormal(rng, 2*c.in*6*6, 1), 2, c.in, 6, 6)
		})
	}
}
