package cuda

import (
	"fmt"
	"math"
	"testing"

	"resnetlab/kernels"
)

// twoStreamConvs are the Conv2dBackward shapes TestConvBackwardTwoStreams
// runs with the weight gradient on the side stream.
var twoStreamConvs = []convCase{
	{100, 512, 1, 1, 512, 3, 3, 1, 1}, // layer4 on a 1x1 map: centre tap only (tap scratch on both streams)
	{100, 256, 2, 2, 512, 3, 3, 2, 1}, // layer4's entry: 2x2 taps of 3x3
	{100, 256, 2, 2, 512, 1, 1, 2, 0}, // layer4's downsample
	{100, 256, 2, 2, 256, 3, 3, 1, 1}, // layer3 on a 2x2 map: all taps
	{16, 64, 8, 8, 64, 3, 3, 1, 1},    // split-K weight gradient
	{4, 256, 2, 2, 80, 3, 3, 1, 1},    // long reduction: split-K on both GEMMs
	{3, 130, 5, 6, 70, 3, 2, 2, 1},    // ragged everything
}

// bitsOf returns t's values (downloaded as fp32) for a bit comparison.
func bitsOf(t *testing.T, g *Backend, x *kernels.Tensor) []float32 {
	t.Helper()
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	return download(g, x)
}

// firstDiff is the first index where a and b differ in bits, or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if i >= len(b) || math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return len(a)
	}
	return -1
}

// sideIdle checks that no fork is open and no workspace is held back or in
// use after an op returned.
func sideIdle(t *testing.T, g *Backend, what string, ws int64) {
	t.Helper()
	if g.side == nil || g.side.forked || len(g.side.held) != 0 {
		t.Fatalf("%s: side stream left forked or holding workspace: %+v", what, g.side)
	}
	if got := g.MemStats().InUse[kernels.CatWorkspace]; got != ws {
		t.Fatalf("%s: workspace in use %d after the op, want %d", what, got, ws)
	}
}

// naiveCheck compares the serial GPU results with the naive reference.
func naiveCheck(t *testing.T, e *env, cc convCase, pr convPrec, tag string, x, w, dy pair, gotX, gotW []float32) {
	t.Helper()
	xv, wv, dyv := download(e.c, x.c), download(e.c, w.c), download(e.c, dy.c)
	if r := relErr(gotX, naiveDgrad(cc, dyv, wv)); !(r <= pr.tol) {
		t.Errorf("%s: dx relative error %.3g > %.1g vs naive reference", tag, r, pr.tol)
	}
	if r := relErr(gotW, naiveWgrad(cc, dyv, xv)); !(r <= pr.tol) {
		t.Errorf("%s: dw relative error %.3g > %.1g vs naive reference", tag, r, pr.tol)
	}
}

// Conv2dBackward with the weight gradient on the side stream gives the
// same bits as the serial order, eagerly and in a graph replay; an op
// queued right after it on the main stream (a copy of dx and dw) sees both
// results; and both match the naive reference.
func TestConvBackwardTwoStreams(t *testing.T) {
	e := newEnv(t)
	g := e.g
	defer func(one, tf32 bool) { g.oneStream, g.TF32 = one, tf32 }(g.oneStream, g.TF32)
	ws := g.MemStats().InUse[kernels.CatWorkspace]
	nan := float32(math.NaN())
	for _, cc := range twoStreamConvs {
		for _, pr := range convPrecs {
			g.TF32 = pr.tf32
			tag := fmt.Sprintf("%+v %v", cc, pr)
			cp := kernels.ConvParams{Stride: cc.stride, Pad: cc.pad}
			P, Q := convOut(cc)
			x := e.randn(kernels.CatActivations, pr.dt, 1, cc.n, cc.c, cc.h, cc.w)
			w := e.randn(kernels.CatParams, pr.dt, 0.2, cc.k, cc.c, cc.r, cc.s)
			dy := e.randn(kernels.CatActivations, pr.dt, 1, cc.n, cc.k, P, Q)
			dx, dw := e.out(pr.dt, cc.n, cc.c, cc.h, cc.w), e.out(pr.dt, cc.k, cc.c, cc.r, cc.s)
			sx, sw := e.out(pr.dt, cc.n, cc.c, cc.h, cc.w), e.out(pr.dt, cc.k, cc.c, cc.r, cc.s)
			poison := func() {
				for _, p := range []pair{dx, dw, sx, sw} {
					g.Fill(p.g, nan)
				}
			}
			// The next ops on the main stream read dx and dw at once.
			ops := func() {
				g.Conv2dBackward(dx.g, dw.g, dy.g, x.g, w.g, cp)
				g.Copy(sw.g, dw.g)
				g.Copy(sx.g, dx.g)
			}

			g.oneStream = true
			poison()
			forks := g.side.forks
			ops()
			if g.side.forks != forks {
				t.Fatalf("%s: one stream asked for, yet the op forked the side stream", tag)
			}
			wantX, wantW := bitsOf(t, g, dx.g), bitsOf(t, g, dw.g)
			sideIdle(t, g, tag+" serial", ws)

			// The naive reference (seconds of CPU at batch 100) for exact
			// fp32 and fp16; TestConvMatchesReference covers the rest.
			if pr.dt == kernels.F16 || pr.dt == kernels.F32 && !pr.tf32 {
				naiveCheck(t, e, cc, pr, tag, x, w, dy, wantX, wantW)
			}

			g.oneStream = false
			compare := func(how string) {
				t.Helper()
				for _, o := range []struct {
					what string
					t    *kernels.Tensor
					want []float32
				}{{"dx", dx.g, wantX}, {"dw", dw.g, wantW}, {"copy of dx", sx.g, wantX}, {"copy of dw", sw.g, wantW}} {
					got := bitsOf(t, g, o.t)
					if i := firstDiff(got, o.want); i >= 0 {
						t.Errorf("%s %s: %s differs from the serial order at [%d]: %g vs %g", tag, how, o.what, i, got[i], o.want[i])
					}
				}
			}
			for i := 0; i < 2; i++ {
				poison()
				forks := g.side.forks
				ops()
				if g.side.forks != forks+1 {
					t.Fatalf("%s: Conv2dBackward forked the side stream %d times, want once", tag, g.side.forks-forks)
				}
				compare(fmt.Sprintf("two streams eager (run %d)", i))
				sideIdle(t, g, tag+" eager", ws)
			}

			poison()
			if err := g.BeginCapture(); err != nil {
				t.Fatal(err)
			}
			ops()
			gr, err := g.EndCapture()
			if err != nil {
				t.Fatalf("%s: EndCapture: %v", tag, err)
			}
			if v := bitsOf(t, g, sw.g); !math.IsNaN(float64(v[0])) {
				t.Fatalf("%s: capturing ran the ops", tag)
			}
			sideIdle(t, g, tag+" capture", ws)
			for i := 0; i < 2; i++ {
				poison()
				if err := gr.Launch(); err != nil {
					t.Fatal(err)
				}
				compare(fmt.Sprintf("graph replay %d", i))
			}
			gr.Destroy()

			// Eager again after the capture: the side stream left it cleanly.
			poison()
			ops()
			compare("two streams eager after a capture")
			e.free(x, w, dy, dx, dw, sx, sw)
		}
	}
}

// LinearBackward likewise: dx on the main stream, dw on the side stream,
// db after the join.
func TestLinearBackwardTwoStreams(t *testing.T) {
	e := newEnv(t)
	g := e.g
	defer func(one bool) { g.oneStream = one }(g.oneStream)
	nan := float32(math.NaN())
	for _, dt := range dtypes {
		for _, sh := range [][3]int{{100, 512, 10}, {100, 512, 100}, {7, 33, 5}} {
			n, in, out := sh[0], sh[1], sh[2]
			tag := fmt.Sprint(dt, sh)
			x, w := e.randn(kernels.CatActivations, dt, 1, n, in), e.randn(kernels.CatParams, dt, 0.1, out, in)
			dy := e.randn(kernels.CatActivations, dt, 1, n, out)
			dx, dw, db := e.out(dt, n, in), e.out(dt, out, in), e.out(dt, out)
			sw := e.out(dt, out, in)
			ops := func() {
				for _, p := range []pair{dx, dw, db, sw} {
					g.Fill(p.g, nan)
				}
				g.LinearBackward(dx.g, dw.g, db.g, dy.g, x.g, w.g)
				g.Copy(sw.g, dw.g)
			}
			g.oneStream = true
			ops()
			want := [][]float32{bitsOf(t, g, dx.g), bitsOf(t, g, dw.g), bitsOf(t, g, db.g), bitsOf(t, g, sw.g)}
			check := func(how string) {
				t.Helper()
				for i, p := range []pair{dx, dw, db, sw} {
					got := bitsOf(t, g, p.g)
					if j := firstDiff(got, want[i]); j >= 0 {
						t.Errorf("%s %s: output %d differs from the serial order at [%d]: %g vs %g", tag, how, i, j, got[j], want[i][j])
					}
				}
			}
			g.oneStream = false
			forks := g.side.forks
			ops()
			if g.side.forks != forks+1 {
				t.Fatalf("%s: LinearBackward forked the side stream %d times, want once", tag, g.side.forks-forks)
			}
			check("eager")
			if err := g.BeginCapture(); err != nil {
				t.Fatal(err)
			}
			ops()
			gr, err := g.EndCapture()
			if err != nil {
				t.Fatalf("%s: EndCapture: %v", tag, err)
			}
			for _, p := range []pair{dx, dw, db, sw} {
				g.Fill(p.g, nan)
			}
			if err := gr.Launch(); err != nil {
				t.Fatal(err)
			}
			check("graph replay")
			gr.Destroy()
			e.free(x, w, dy, dx, dw, db, sw)
		}
	}
}
