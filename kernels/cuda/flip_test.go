package cuda

import (
	"math"
	"math/rand"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
)

// The stride-1 data gradient is the forward convolution of dy with the
// weights rotated by 180 degrees and transposed, pad R-1-pad (flipped, and
// conv_flip's indexing): checked on the CPU backend, for full kernels and
// for tap windows on small maps, against its own Conv2dBackward.
func TestDgradIsFlippedForward(t *testing.T) {
	c := cpu.New()
	rng := rand.New(rand.NewSource(3))
	for _, s := range []convShape{
		{N: 2, C: 3, H: 5, W: 5, K: 4, R: 3, S: 3, Stride: 1, Pad: 1},
		{N: 2, C: 3, H: 4, W: 4, K: 5, R: 3, S: 3, Stride: 1, Pad: 0},
		{N: 1, C: 4, H: 3, W: 3, K: 2, R: 1, S: 1, Stride: 1, Pad: 0},
		{N: 3, C: 2, H: 1, W: 1, K: 3, R: 3, S: 3, Stride: 1, Pad: 1}, // window: the centre tap
		{N: 2, C: 2, H: 6, W: 6, K: 2, R: 5, S: 5, Stride: 1, Pad: 2},
	} {
		s.P = int32(kernels.OutSize(int(s.H), int(s.R), 1, int(s.Pad)))
		s.Q = int32(kernels.OutSize(int(s.W), int(s.S), 1, int(s.Pad)))
		fill := func(shape ...int) *kernels.Tensor {
			x := c.New(kernels.CatWorkspace, kernels.F32, shape...)
			v := make([]float32, x.Len())
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			c.Upload(x, v)
			return x
		}
		n, ch, h, w, k, r := int(s.N), int(s.C), int(s.H), int(s.W), int(s.K), int(s.R)
		x, wt, dy := fill(n, ch, h, w), fill(k, ch, r, r), fill(n, k, int(s.P), int(s.Q))
		dx, dw := c.New(kernels.CatWorkspace, kernels.F32, n, ch, h, w), c.New(kernels.CatWorkspace, kernels.F32, k, ch, r, r)
		c.Conv2dBackward(dx, dw, dy, x, wt, kernels.ConvParams{Stride: 1, Pad: int(s.Pad)})

		win, _ := s.window()
		fs, ok := win.flipped()
		if !ok || fs.P != s.H || fs.Q != s.W || fs.H != s.P || fs.C != s.K || fs.K != s.C {
			t.Fatalf("%+v: flipped %+v, %v", s, fs, ok)
		}
		// The window's taps of w, then conv_flip's indexing.
		wv := download(c, wt)
		rw, r0 := int(win.R), int(s.Pad-win.Pad)
		rs := rw * rw
		flip := make([]float32, ch*k*rs)
		for i := range flip {
			tap, ck := i%rs, i/rs
			kk, cc := ck%k, ck/k
			src := rs - 1 - tap // the window's flat tap, reversed
			rr, ss := src/rw+r0, src%rw+r0
			flip[i] = wv[((kk*ch+cc)*r+rr)*r+ss]
		}
		wf := c.New(kernels.CatWorkspace, kernels.F32, ch, k, rw, rw)
		c.Upload(wf, flip)
		got := c.New(kernels.CatWorkspace, kernels.F32, n, ch, h, w)
		c.Conv2dForward(got, dy, wf, kernels.ConvParams{Stride: 1, Pad: int(fs.Pad)})
		want, g := download(c, dx), download(c, got)
		for i := range want {
			if math.Abs(float64(g[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%+v: dx[%d] = %v by the flipped forward, %v by Conv2dBackward", s, i, g[i], want[i])
			}
		}
	}
	if _, ok := (convShape{R: 3, S: 3, Stride: 2, Pad: 1}).flipped(); ok {
		t.Error("a stride-2 data gradient has no flipped forward")
	}
}
