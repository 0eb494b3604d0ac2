package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"resnetlab/kernels"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 42)) }

// randVals returns n uniform values in [-1,1).
func randVals(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	return v
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// tensorOf makes an F32 activation tensor holding vals.
func tensorOf(b *Backend, vals []float32, shape ...int) *kernels.Tensor {
	t := b.New(kernels.CatActivations, kernels.F32, shape...)
	b.Upload(t, vals)
	return t
}

// randTensor makes an F32 tensor of uniform values in [-1,1).
func randTensor(b *Backend, rng *rand.Rand, shape ...int) *kernels.Tensor {
	return tensorOf(b, randVals(rng, kernels.NumElems(shape)), shape...)
}

// assertClose checks |got-want| <= tol*max(|want|, rms(want), tiny) for
// every element: relative error, but measured against the vector's scale
// where an element is near zero by cancellation.
func assertClose(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var ss float64
	for _, w := range want {
		ss += w * w
	}
	rms := math.Sqrt(ss / math.Max(1, float64(len(want))))
	bad := 0
	for i, g := range got {
		w := want[i]
		lim := tol * math.Max(math.Max(math.Abs(w), rms), 1e-30)
		if d := math.Abs(float64(g) - w); !(d <= lim) {
			if bad < 5 {
				t.Errorf("%s[%d] = %.9g, want %.9g (|diff| %.3g > %.3g)", what, i, g, w, d, lim)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements out of tolerance", what, bad, len(got))
	}
}

func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: lengths %d and %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s[%d]: %v (%#x) vs %v (%#x): not bit-identical", what, i,
				a[i], math.Float32bits(a[i]), b[i], math.Float32bits(b[i]))
		}
	}
}
