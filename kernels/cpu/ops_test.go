package cpu

import (
	"math"
	"testing"

	"resnetlab/kernels"
)

func TestBatchNormTrainAgainstReference(t *testing.T) {
	b := New()
	rng := newRNG(4)
	n, c, h, w := 3, 5, 7, 3
	x := randTensor(b, rng, n, c, h, w)
	for i := range x.Host { // an offset per element so the mean matters
		x.Host[i] = x.Host[i]*2 + 0.5
	}
	gamma, beta := randTensor(b, rng, c), randTensor(b, rng, c)
	rm, rv := randTensor(b, rng, c), randTensor(b, rng, c)
	for i := range rv.Host {
		rv.Host[i] = float32(math.Abs(float64(rv.Host[i]))) + 0.5
	}
	rm0, rv0 := f64(rm.Host), f64(rv.Host)
	sm, si := b.New(kernels.CatActivations, kernels.F32, c), b.New(kernels.CatActivations, kernels.F32, c)
	y := b.New(kernels.CatActivations, kernels.F32, n, c, h, w)
	const eps, mom = 1e-5, 0.1
	b.BatchNormForward(y, x, gamma, beta, rm, rv, sm, si, true, mom, eps)
	ry, mean, variance := refBNTrain(f64(x.Host), f64(gamma.Host), f64(beta.Host), n, c, h*w, eps)
	assertClose(t, "y", y.Host, ry, 1e-5)
	assertClose(t, "saveMean", sm.Host, mean, 1e-6)
	inv, wrm, wrv := make([]float64, c), make([]float64, c), make([]float64, c)
	cnt := float64(n * h * w)
	for i := range inv {
		inv[i] = 1 / math.Sqrt(variance[i]+eps)
		wrm[i] = (1-mom)*rm0[i] + mom*mean[i]
		wrv[i] = (1-mom)*rv0[i] + mom*variance[i]*cnt/(cnt-1) // unbiased
	}
	assertClose(t, "saveInvStd", si.Host, inv, 1e-6)
	assertClose(t, "runMean", rm.Host, wrm, 1e-6)
	assertClose(t, "runVar", rv.Host, wrv, 1e-6)

	// Backward against the closed form of the batch-norm gradient.
	dy := randTensor(b, rng, n, c, h, w)
	dx := b.New(kernels.CatActivations, kernels.F32, n, c, h, w)
	dg, db := b.New(kernels.CatGrads, kernels.F32, c), b.New(kernels.CatGrads, kernels.F32, c)
	b.BatchNormBackward(dx, dg, db, dy, x, gamma, sm, si)
	rdx, rdg, rdb := make([]float64, len(dx.Host)), make([]float64, c), make([]float64, c)
	hw := h * w
	for ch := 0; ch < c; ch++ {
		for i := 0; i < n; i++ {
			for j := 0; j < hw; j++ {
				k := (i*c+ch)*hw + j
				rdb[ch] += float64(dy.Host[k])
				rdg[ch] += float64(dy.Host[k]) * (float64(x.Host[k]) - mean[ch]) * inv[ch]
			}
		}
		for i := 0; i < n; i++ {
			for j := 0; j < hw; j++ {
				k := (i*c+ch)*hw + j
				xh := (float64(x.Host[k]) - mean[ch]) * inv[ch]
				rdx[k] = float64(gamma.Host[ch]) * inv[ch] * (float64(dy.Host[k]) - rdb[ch]/cnt - xh*rdg[ch]/cnt)
			}
		}
	}
	assertClose(t, "dx", dx.Host, rdx, 1e-5)
	assertClose(t, "dgamma", dg.Host, rdg, 1e-5)
	assertClose(t, "dbeta", db.Host, rdb, 1e-5)
}

func TestBatchNormEval(t *testing.T) {
	b := New()
	rng := newRNG(5)
	n, c, h, w := 3, 6, 2, 5
	x, gamma, beta, rm := randTensor(b, rng, n, c, h, w), randTensor(b, rng, c), randTensor(b, rng, c), randTensor(b, rng, c)
	rv := tensorOf(b, []float32{0.5, 1, 2, 0.25, 3, 1.5}, c)
	rm0, rv0 := append([]float32(nil), rm.Host...), append([]float32(nil), rv.Host...)
	y := b.New(kernels.CatActivations, kernels.F32, n, c, h, w)
	b.BatchNormForward(y, x, gamma, beta, rm, rv, nil, nil, false, 0.1, 1e-5)
	want := make([]float64, len(y.Host))
	for i := range want {
		ch := i / (h * w) % c
		want[i] = (float64(x.Host[i])-float64(rm.Host[ch]))/math.Sqrt(float64(rv.Host[ch])+1e-5)*float64(gamma.Host[ch]) + float64(beta.Host[ch])
	}
	assertClose(t, "y", y.Host, want, 1e-5)
	sameBits(t, "runMean unchanged", rm.Host, rm0)
	sameBits(t, "runVar unchanged", rv.Host, rv0)
}

func TestPoolingAgainstReference(t *testing.T) {
	b := New()
	rng := newRNG(6)
	for _, sz := range [][2]int{{7, 9}, {8, 8}, {3, 2}, {1, 1}} {
		n, c, h, w := 3, 5, sz[0], sz[1]
		p := kernels.PoolParams{K: 3, Stride: 2, Pad: 1}
		P, Q := kernels.OutSize(h, 3, 2, 1), kernels.OutSize(w, 3, 2, 1)
		x := randTensor(b, rng, n, c, h, w)
		y := b.New(kernels.CatActivations, kernels.F32, n, c, P, Q)
		b.MaxPoolForward(y, x, p)
		assertClose(t, "maxpool", y.Host, refMaxPool(f64(x.Host), n, c, h, w, 3, 2, 1), 0)

		g := b.New(kernels.CatActivations, kernels.F32, n, c)
		b.GlobalAvgPoolForward(g, x)
		assertClose(t, "avgpool", g.Host, refAvgPool(f64(x.Host), n*c, h*w), 1e-6)
	}
}

// TestMaxPoolTies checks that the first maximum of a window gets the
// gradient and that padding never wins, not even over -inf inputs.
func TestMaxPoolTies(t *testing.T) {
	b := New()
	inf := float32(math.Inf(-1))
	x := tensorOf(b, []float32{
		2, 2, 1,
		2, 0, 2,
		inf, inf, inf,
	}, 1, 1, 3, 3)
	p := kernels.PoolParams{K: 3, Stride: 2, Pad: 1}
	y := b.New(kernels.CatActivations, kernels.F32, 1, 1, 2, 2)
	b.MaxPoolForward(y, x, p)
	sameBits(t, "y", y.Host, []float32{2, 2, 2, 2})
	dy := tensorOf(b, []float32{1, 10, 100, 1000}, 1, 1, 2, 2)
	dx := b.New(kernels.CatActivations, kernels.F32, 1, 1, 3, 3)
	b.MaxPoolBackward(dx, dy, x, p)
	// Window (0,0) covers x[0..1][0..1]: first max x[0][0]. Window (0,1)
	// covers x[0..1][1..2]: first max x[0][1]. Window (1,0): x[1..2][0..1]
	// first max x[1][0]. Window (1,1): x[1..2][1..2]: first max x[1][2].
	sameBits(t, "dx", dx.Host, []float32{1, 10, 0, 100, 0, 1000, 0, 0, 0})
	allInf := tensorOf(b, []float32{inf, inf, inf, inf}, 1, 1, 2, 2)
	y1 := b.New(kernels.CatActivations, kernels.F32, 1, 1, 1, 1)
	b.MaxPoolForward(y1, allInf, p)
	dx1 := b.New(kernels.CatActivations, kernels.F32, 1, 1, 2, 2)
	b.MaxPoolBackward(dx1, tensorOf(b, []float32{5}, 1, 1, 1, 1), allInf, p)
	sameBits(t, "dx all -inf", dx1.Host, []float32{5, 0, 0, 0})
}

func TestLinearAgainstReference(t *testing.T) {
	b := New()
	rng := newRNG(7)
	n, in, out := 3, 37, 10
	x, w, bias := randTensor(b, rng, n, in), randTensor(b, rng, out, in), randTensor(b, rng, out)
	y := b.New(kernels.CatActivations, kernels.F32, n, out)
	b.LinearForward(y, x, w, bias)
	assertClose(t, "y", y.Host, refLinear(f64(x.Host), f64(w.Host), f64(bias.Host), n, in, out), 1e-5)
	dy := randTensor(b, rng, n, out)
	dx, dw, db := b.New(kernels.CatActivations, kernels.F32, n, in), b.New(kernels.CatGrads, kernels.F32, out, in), b.New(kernels.CatGrads, kernels.F32, out)
	b.LinearBackward(dx, dw, db, dy, x, w)
	rdx, rdw, rdb := make([]float64, n*in), make([]float64, out*in), make([]float64, out)
	for i := 0; i < n; i++ {
		for o := 0; o < out; o++ {
			g := float64(dy.Host[i*out+o])
			rdb[o] += g
			for j := 0; j < in; j++ {
				rdx[i*in+j] += g * float64(w.Host[o*in+j])
				rdw[o*in+j] += g * float64(x.Host[i*in+j])
			}
		}
	}
	assertClose(t, "dx", dx.Host, rdx, 1e-5)
	assertClose(t, "dw", dw.Host, rdw, 1e-5)
	assertClose(t, "db", db.Host, rdb, 1e-6)
}

func TestCrossEntropyAgainstReference(t *testing.T) {
	b := New()
	rng := newRNG(8)
	n, k := 3, 10
	z := randTensor(b, rng, n, k)
	for i := range z.Host {
		z.Host[i] *= 30 // large logits: a naive fp32 exp would overflow
	}
	z.Host[3] = 95 // exp(95) overflows float32
	labs := []int{3, 0, 9}
	labels := tensorOf(b, []float32{3, 0, 9}, n)
	loss := b.New(kernels.CatActivations, kernels.F32, 1)
	dz := b.New(kernels.CatActivations, kernels.F32, n, k)
	const scale = 64
	b.SoftmaxCrossEntropy(loss, dz, z, labels, scale)
	// refCE is naive (no max shift) but runs in float64, where exp(95) is fine.
	assertClose(t, "loss", loss.Host, []float64{refCE(f64(z.Host), labs, n, k)}, 1e-6)
	want := make([]float64, n*k)
	for i := 0; i < n; i++ {
		var s float64
		for j := 0; j < k; j++ {
			s += math.Exp(float64(z.Host[i*k+j]))
		}
		for j := 0; j < k; j++ {
			want[i*k+j] = math.Exp(float64(z.Host[i*k+j])) / s
			if j == labs[i] {
				want[i*k+j]--
			}
			want[i*k+j] *= scale / float64(n)
		}
	}
	assertClose(t, "dlogits", dz.Host, want, 1e-6)
	b.SoftmaxCrossEntropy(loss, nil, z, labels, scale) // eval: no gradient
	assertClose(t, "loss (eval)", loss.Host, []float64{refCE(f64(z.Host), labs, n, k)}, 1e-6)
}

func TestElementwise(t *testing.T) {
	b := New()
	rng := newRNG(9)
	n := 3*grain + 17 // several parallel chunks
	a, c := randTensor(b, rng, n), randTensor(b, rng, n)
	nan := float32(math.NaN())
	a.Host[0], a.Host[1] = nan, float32(math.Copysign(0, -1))
	y := b.New(kernels.CatActivations, kernels.F32, n)
	b.ReLUForward(y, a)
	for i, v := range a.Host {
		want := v
		if v <= 0 {
			want = 0
		}
		if y.Host[i] != want && !(i == 0 && y.Host[i] != y.Host[i]) {
			t.Fatalf("relu(%v) = %v at %d, want %v (NaN propagates)", v, y.Host[i], i, want)
		}
	}
	if math.Signbit(float64(y.Host[1])) {
		t.Errorf("relu(-0) = -0, want +0")
	}
	dx := b.New(kernels.CatActivations, kernels.F32, n)
	b.ReLUBackward(dx, c, y)
	for i := range dx.Host {
		want := c.Host[i]
		if !(y.Host[i] > 0) {
			want = 0
		}
		if dx.Host[i] != want {
			t.Fatalf("relu backward at %d: %v, want %v", i, dx.Host[i], want)
		}
	}
	sum := b.New(kernels.CatActivations, kernels.F32, n)
	b.Add(sum, a, c)
	b.Add(c, c, c) // aliasing allowed
	for i := range sum.Host[2:] {
		i += 2
		if sum.Host[i] != a.Host[i]+(c.Host[i]/2) || c.Host[i] != 2*(c.Host[i]/2) {
			t.Fatalf("add at %d: %v", i, sum.Host[i])
		}
	}
	cp := b.New(kernels.CatActivations, kernels.F32, n)
	b.Copy(cp, sum)
	b.Scale(cp, 3)
	for i := range cp.Host[2:] {
		if cp.Host[i+2] != sum.Host[i+2]*3 {
			t.Fatalf("scale at %d: %v, want %v", i+2, cp.Host[i+2], sum.Host[i+2]*3)
		}
	}
	if !b.NonFinite([]*kernels.Tensor{cp, a}) {
		t.Errorf("NonFinite missed a NaN")
	}
	b.Fill(a, 1)
	if b.NonFinite([]*kernels.Tensor{a}) {
		t.Errorf("NonFinite flagged finite values")
	}
	a.Host[n-1] = float32(math.Inf(-1))
	if !b.NonFinite([]*kernels.Tensor{a}) {
		t.Errorf("NonFinite missed -inf")
	}
}

// TestNonFiniteParallel: the split scan finds a single inf or NaN at the
// edges and in the middle of a tensor larger than one work slice, and
// nothing in a finite one, with one worker and with several.
func TestNonFiniteParallel(t *testing.T) {
	for _, w := range []int{1, 4} {
		b := New(WithWorkers(w))
		x := b.New(kernels.CatGrads, kernels.F32, 5*grain+3)
		x.Host[7] = math.MaxFloat32
		if b.NonFinite([]*kernels.Tensor{x}) {
			t.Errorf("workers %d: finite tensor reported non-finite", w)
		}
		for _, i := range []int{0, 2*grain + 1, x.Len() - 1} {
			for _, v := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
				x.Host[i] = v
				if !b.NonFinite([]*kernels.Tensor{x}) {
					t.Errorf("workers %d: %g at %d not seen", w, v, i)
				}
				x.Host[i] = 0
			}
		}
	}
}

// TestCopyRoundsEveryPiece checks Copy into half-precision tensors large
// enough to be split over the workers: every element is the source
// rounded to the destination's dtype.
func TestCopyRoundsEveryPiece(t *testing.T) {
	b := New()
	rng := newRNG(3)
	n := 5*grain + 3
	src := b.New(kernels.CatActivations, kernels.F32, n)
	copy(src.Host, randVals(rng, n))
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16, kernels.F32} {
		dst := b.New(kernels.CatParams, dt, n)
		b.Copy(dst, src)
		for i, v := range src.Host {
			if want := roundTo(dt, v); dst.Host[i] != want {
				t.Fatalf("%v: element %d is %v, want %v (from %v)", dt, i, dst.Host[i], want, v)
			}
		}
	}
}
