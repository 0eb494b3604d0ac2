package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
)

func newBackend(t *testing.T) kernels.Backend {
	t.Helper()
	return cpu.New()
}

// upload allocates a tensor holding data.
func upload(be kernels.Backend, cat kernels.Category, dt kernels.DType, data []float32, shape ...int) *kernels.Tensor {
	t := be.New(cat, dt, shape...)
	be.Upload(t, data)
	return t
}

func download(be kernels.Backend, t *kernels.Tensor) []float32 {
	out := make([]float32, t.Len())
	be.Download(t, out)
	return out
}

func randNormal(rng *rand.Rand, n int, std float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * std)
	}
	return out
}

// dot is the float64 inner product of a float32 tensor and weights.
func dot(a []float32, r []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(r[i])
	}
	return s
}

// gradTarget is one tensor whose analytic gradient is checked: get/set move
// its values through host memory; grad is the analytic gradient.
type gradTarget struct {
	name string
	get  func() []float32
	set  func([]float32)
	grad []float32
}

func paramTarget(be kernels.Backend, p *Param) gradTarget {
	return gradTarget{
		name: p.Name,
		get:  func() []float32 { return download(be, p.W) },
		set:  func(v []float32) { be.Upload(p.W, v) },
		grad: download(be, p.G),
	}
}

// fdTol is the acceptance rule of every finite-difference check: the
// predicted change of the loss and the measured change may differ by
// rel*|measured| + abs.
type fdTol struct{ rel, abs float64 }

func (tol fdTol) ok(an, fd float64) bool {
	return math.Abs(an-fd) <= tol.rel*math.Abs(fd)+tol.abs
}

// checkDirectional perturbs the whole target by ±h*u (u standard normal) and
// compares the change of loss with sum(grad * Δ), Δ the exact float32
// difference of the perturbed values, so rounding of the perturbation
// itself does not count as error. h is relative to the target's RMS value.
func checkDirectional(t *testing.T, rng *rand.Rand, loss func() float64, tg gradTarget, hRel float64, tol fdTol) {
	t.Helper()
	orig := tg.get()
	h := hRel * rms(orig)
	u := randNormal(rng, len(orig), 1)
	plus, minus := make([]float32, len(orig)), make([]float32, len(orig))
	an := 0.0
	for i := range orig {
		plus[i] = orig[i] + float32(h)*u[i]
		minus[i] = orig[i] - float32(h)*u[i]
		an += float64(tg.grad[i]) * (float64(plus[i]) - float64(minus[i]))
	}
	tg.set(plus)
	lp := loss()
	tg.set(minus)
	lm := loss()
	tg.set(orig)
	if fd := lp - lm; !tol.ok(an, fd) {
		t.Errorf("%s: directional change analytic %.6g, finite difference %.6g (h=%.3g, tol rel %g abs %g)",
			tg.name, an, fd, h, tol.rel, tol.abs)
	}
}

// checkElements checks single elements: the k largest |grad| and k random.
func checkElements(t *testing.T, rng *rand.Rand, loss func() float64, tg gradTarget, k int, hRel float64, tol fdTol) {
	t.Helper()
	orig := tg.get()
	h := float32(hRel * rms(orig))
	for _, i := range pickIndices(rng, tg.grad, k) {
		v := append([]float32(nil), orig...)
		v[i] = orig[i] + h
		tg.set(v)
		lp := loss()
		v[i] = orig[i] - h
		tg.set(v)
		lm := loss()
		an := float64(tg.grad[i]) * (float64(orig[i]+h) - float64(orig[i]-h))
		if fd := lp - lm; !tol.ok(an, fd) {
			t.Errorf("%s[%d]: change analytic %.6g, finite difference %.6g (grad %.4g, h=%.3g)",
				tg.name, i, an, fd, tg.grad[i], h)
		}
	}
	tg.set(orig)
}

// pickIndices returns the k indices of largest |g| and k random ones.
func pickIndices(rng *rand.Rand, g []float32, k int) []int {
	var idx []int
	used := map[int]bool{}
	for range min(k, len(g)) {
		best := -1
		for i, v := range g {
			if !used[i] && (best < 0 || math.Abs(float64(v)) > math.Abs(float64(g[best]))) {
				best = i
			}
		}
		used[best] = true
		idx = append(idx, best)
	}
	for range k {
		idx = append(idx, rng.IntN(len(g)))
	}
	return idx
}

func rms(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	r := math.Sqrt(s / float64(len(v)))
	if r == 0 {
		return 1
	}
	return r
}

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
