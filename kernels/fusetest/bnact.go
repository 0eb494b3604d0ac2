package fusetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"resnetlab/kernels"
)

// BNActCase is one configuration of CheckBNAct.
type BNActCase struct {
	DType      kernels.DType
	Training   bool
	Residual   bool
	N, C, H, W int
}

func (c BNActCase) String() string {
	mode, res := "eval", "plain"
	if c.Training {
		mode = "train"
	}
	if c.Residual {
		res = "residual"
	}
	return fmt.Sprintf("%s/%s/%s/%dx%dx%dx%d", c.DType, mode, res, c.N, c.C, c.H, c.W)
}

// BNActCases are the configurations every backend checks: each dtype,
// train and eval, with and without the residual, on an odd plane (49
// elements, so no loop divides it evenly) and a wider one.
func BNActCases() []BNActCase {
	var cs []BNActCase
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
		for _, train := range []bool{true, false} {
			for _, res := range []bool{false, true} {
				cs = append(cs, BNActCase{dt, train, res, 3, 5, 7, 7})
			}
		}
		cs = append(cs, BNActCase{dt, true, true, 4, 3, 32, 32})
	}
	return cs
}

// bnInputs are the operands of one check, uploaded to the backend.
type bnInputs struct {
	x, res, dy, gamma, beta *kernels.Tensor
	rm0, rv0                []float32 // initial running stats
}

func randVals(rng *rand.Rand, n int, scale, shift float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (rng.Float32()*2-1)*scale + shift
	}
	return v
}

func upload(be kernels.Backend, dt kernels.DType, vals []float32, shape ...int) *kernels.Tensor {
	t := be.New(kernels.CatActivations, dt, shape...)
	be.Upload(t, vals)
	return t
}

func newInputs(be kernels.Backend, c BNActCase, seed uint64) *bnInputs {
	rng := rand.New(rand.NewPCG(seed, 7))
	n := c.N * c.C * c.H * c.W
	shape := []int{c.N, c.C, c.H, c.W}
	in := &bnInputs{
		x:     upload(be, c.DType, randVals(rng, n, 2, 0.3), shape...),
		res:   upload(be, c.DType, randVals(rng, n, 1, 0), shape...),
		dy:    upload(be, c.DType, randVals(rng, n, 1, 0), shape...),
		gamma: upload(be, kernels.F32, randVals(rng, c.C, 1, 0.5), c.C), // some negative
		beta:  upload(be, kernels.F32, randVals(rng, c.C, 0.5, 0), c.C),
		rm0:   randVals(rng, c.C, 0.2, 0.1),
		rv0:   randVals(rng, c.C, 0.4, 1.2),
	}
	return in
}

// bnState is what one run of the forward and backward writes.
type bnState struct {
	y, rm, rv, sm, si, ds, dx, dg, db *kernels.Tensor
}

func newState(be kernels.Backend, c BNActCase, in *bnInputs) *bnState {
	shape := []int{c.N, c.C, c.H, c.W}
	act := func() *kernels.Tensor { return be.New(kernels.CatActivations, c.DType, shape...) }
	f32 := func() *kernels.Tensor { return be.New(kernels.CatActivations, kernels.F32, c.C) }
	s := &bnState{y: act(), rm: f32(), rv: f32(), sm: f32(), si: f32(), ds: act(), dx: act(), dg: f32(), db: f32()}
	be.Upload(s.rm, in.rm0)
	be.Upload(s.rv, in.rv0)
	return s
}

func (s *bnState) free(be kernels.Backend) {
	for _, t := range []*kernels.Tensor{s.y, s.rm, s.rv, s.sm, s.si, s.ds, s.dx, s.dg, s.db} {
		be.Free(t)
	}
}

// separate runs the unfused ops exactly as model.BasicBlock does.
func separate(be kernels.Backend, c BNActCase, in *bnInputs, s *bnState) {
	be.BatchNormForward(s.y, in.x, in.gamma, in.beta, s.rm, s.rv, s.sm, s.si, c.Training, 0.1, 1e-5)
	if c.Residual {
		be.Add(s.y, s.y, in.res)
	}
	be.ReLUForward(s.y, s.y)
	if c.Training {
		be.ReLUBackward(s.ds, in.dy, s.y)
		be.BatchNormBackward(s.dx, s.dg, s.db, s.ds, in.x, in.gamma, s.sm, s.si)
	}
}

// fused runs the fused ops; withDs false passes no ds tensor.
func fused(f kernels.FusedBN, c BNActCase, in *bnInputs, s *bnState, withDs bool) {
	var res, ds *kernels.Tensor
	if c.Residual {
		res = in.res
	}
	if withDs {
		ds = s.ds
	}
	f.BatchNormActForward(s.y, in.x, res, in.gamma, in.beta, s.rm, s.rv, s.sm, s.si, c.Training, 0.1, 1e-5)
	if c.Training {
		f.BatchNormActBackward(s.dx, ds, s.dg, s.db, in.dy, s.y, in.x, in.gamma, s.sm, s.si)
	}
}

func download(be kernels.Backend, t *kernels.Tensor) []float32 {
	h := make([]float32, t.Len())
	be.Download(t, h)
	return h
}

// sameBits fails unless a and b are equal bit for bit.
func sameBits(t testing.TB, what string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Errorf("%s[%d]: fused %v (%#x), separate %v (%#x): not bit-identical", what, i,
				b[i], math.Float32bits(b[i]), a[i], math.Float32bits(a[i]))
			return
		}
	}
}

// CheckBNAct runs case c on be with the separate ops and with f (be's
// fused ops), with and without a ds output, and fails unless outputs,
// running and saved statistics and every gradient are bit-identical. It
// also fails when the case does not exercise the ReLU (no zeroed and no
// positive outputs), so it cannot pass vacuously.
func CheckBNAct(t testing.TB, be kernels.Backend, f kernels.FusedBN, c BNActCase) {
	t.Helper()
	in := newInputs(be, c, uint64(c.N*1000+c.C*10+int(c.DType)))
	defer func() {
		for _, x := range []*kernels.Tensor{in.x, in.res, in.dy, in.gamma, in.beta} {
			be.Free(x)
		}
	}()
	want := newState(be, c, in)
	defer want.free(be)
	separate(be, c, in, want)
	for _, withDs := range []bool{true, false} {
		got := newState(be, c, in)
		fused(f, c, in, got, withDs)
		compare(t, be, c, want, got, withDs)
		got.free(be)
	}
	checkExercised(t, download(be, want.y))
}

func compare(t testing.TB, be kernels.Backend, c BNActCase, want, got *bnState, withDs bool) {
	t.Helper()
	type pair struct {
		name string
		a, b *kernels.Tensor
	}
	ps := []pair{{"y", want.y, got.y}, {"running_mean", want.rm, got.rm}, {"running_var", want.rv, got.rv}}
	if c.Training {
		ps = append(ps, pair{"save_mean", want.sm, got.sm}, pair{"save_invstd", want.si, got.si},
			pair{"dx", want.dx, got.dx}, pair{"dgamma", want.dg, got.dg}, pair{"dbeta", want.db, got.db})
		if withDs {
			ps = append(ps, pair{"ds", want.ds, got.ds})
		}
	}
	for _, p := range ps {
		sameBits(t, fmt.Sprintf("%v ds=%v %s", c, withDs, p.name), download(be, p.a), download(be, p.b))
	}
}

func checkExercised(t testing.TB, y []float32) {
	t.Helper()
	var zero, pos int
	for _, v := range y {
		switch {
		case v == 0:
			zero++
		case v > 0:
			pos++
		}
	}
	if zero == 0 || pos == 0 {
		t.Errorf("case does not exercise the ReLU: %d zeroed and %d positive outputs", zero, pos)
	}
}
