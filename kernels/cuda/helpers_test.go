package cuda

import (
	"fmt"
	"math"
	"math/rand"
	"sync"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
)

var (
	devOnce sync.Once
	devB    *Backend
	devErr  error
)

// device returns the shared GPU backend, or skips the test (with the reason)
// on a machine without a usable CUDA driver and device, such as CI.
func device(t testing.TB) *Backend {
	devOnce.Do(func() {
		if err := Available(); err != nil {
			devErr = err
			return
		}
		devB, devErr = New(0)
	})
	if devErr != nil {
		if Available() != nil {
			t.Skipf("no CUDA device: %v", devErr)
		}
		t.Fatalf("cuda.New(0): %v", devErr)
	}
	devB.TF32 = true
	return devB
}

// env runs the same op on the GPU and on the CPU reference backend.
type env struct {
	t   *testing.T
	g   *Backend
	c   *cpu.Backend
	rng *rand.Rand
}

func newEnv(t *testing.T) *env {
	return &env{t: t, g: device(t), c: cpu.New(), rng: rand.New(rand.NewSource(int64(len(t.Name()))*7919 + 1))}
}

// pair is one tensor on each backend.
type pair struct{ g, c *kernels.Tensor }

func (e *env) normals(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(e.rng.NormFloat64() * scale)
	}
	return v
}

// randn makes a pair holding the same N(0, scale^2) values.
func (e *env) randn(cat kernels.Category, dt kernels.DType, scale float64, shape ...int) pair {
	p := pair{e.g.New(cat, dt, shape...), e.c.New(cat, dt, shape...)}
	v := e.normals(p.c.Len(), scale)
	e.g.Upload(p.g, v)
	e.c.Upload(p.c, v)
	return p
}

// values makes a pair holding v.
func (e *env) values(dt kernels.DType, v []float32, shape ...int) pair {
	p := pair{e.g.New(kernels.CatData, dt, shape...), e.c.New(kernels.CatData, dt, shape...)}
	e.g.Upload(p.g, v)
	e.c.Upload(p.c, v)
	return p
}

// out makes an output pair; the GPU side is poisoned with NaN so that an
// element the kernel fails to write shows up as an error.
func (e *env) out(dt kernels.DType, shape ...int) pair {
	p := pair{e.g.New(kernels.CatActivations, dt, shape...), e.c.New(kernels.CatActivations, dt, shape...)}
	e.g.Fill(p.g, float32(math.NaN()))
	return p
}

func (e *env) free(ps ...pair) {
	for _, p := range ps {
		e.g.Free(p.g)
		e.c.Free(p.c)
	}
}

func download(b kernels.Backend, t *kernels.Tensor) []float32 {
	v := make([]float32, t.Len())
	b.Download(t, v)
	return v
}

// relErr is ||got-want|| / ||want|| (NaN/Inf in got make it +Inf).
func relErr(got, want []float32) float64 {
	var d, n float64
	for i := range want {
		if math.IsNaN(float64(got[i])) || math.IsInf(float64(got[i]), 0) {
			return math.Inf(1)
		}
		x := float64(got[i]) - float64(want[i])
		d += x * x
		n += float64(want[i]) * float64(want[i])
	}
	if n == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / n)
}

// check compares the two sides of p within tol (relative L2 error).
func (e *env) check(what string, p pair, tol float64) {
	e.t.Helper()
	if err := e.g.Sync(); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	got, want := download(e.g, p.g), download(e.c, p.c)
	if r := relErr(got, want); !(r <= tol) {
		i := worst(got, want)
		e.t.Errorf("%s %v: relative error %.3g > %.1g (worst [%d]: gpu %g cpu %g)", what, p.g, r, tol, i, got[i], want[i])
	}
}

func worst(got, want []float32) int {
	w, wd := 0, -1.0
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			return i
		}
		if d > wd {
			w, wd = i, d
		}
	}
	return w
}

var dtypes = []kernels.DType{kernels.F32, kernels.F16, kernels.BF16}

// tolFor is the tolerance of a computation whose result is stored in dt.
func tolFor(dt kernels.DType, f32 float64) float64 {
	switch dt {
	case kernels.F16:
		return 1e-2
	case kernels.BF16:
		return 2e-2
	}
	return f32
}

func name(parts ...any) string { return fmt.Sprint(parts...) }
