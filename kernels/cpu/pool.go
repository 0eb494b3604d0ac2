package cpu

import (
	"fmt"

	"resnetlab/kernels"
)

type poolGeom struct{ N, C, H, W, P, Q, k, stride, pad int }

func newPoolGeom(op string, y, x *kernels.Tensor, p kernels.PoolParams) poolGeom {
	var g poolGeom
	g.N, g.C, g.H, g.W = dims4(op, "x", x)
	if p.K < 1 || p.Stride < 1 || p.Pad < 0 || 2*p.Pad > p.K {
		panic(fmt.Sprintf("cpu: %s: bad pool params %+v (want K, Stride >= 1 and 0 <= Pad <= K/2)", op, p))
	}
	g.k, g.stride, g.pad = p.K, p.Stride, p.Pad
	g.P = kernels.OutSize(g.H, g.k, g.stride, g.pad)
	g.Q = kernels.OutSize(g.W, g.k, g.stride, g.pad)
	wantShape(op, "y/dy", y, g.N, g.C, g.P, g.Q)
	return g
}

// argmax returns the index (in the H*W plane) and value of the maximum of
// one pooling window. Padding counts as -inf (it is never a candidate), the
// first maximum wins, and a NaN wins like in PyTorch (so NaN propagates).
func (g poolGeom) argmax(plane []float32, oh, ow int) (int, float32) {
	h0, w0 := oh*g.stride-g.pad, ow*g.stride-g.pad
	hs, he := max(h0, 0), min(h0+g.k, g.H)
	ws, we := max(w0, 0), min(w0+g.k, g.W)
	idx := hs*g.W + ws
	best := plane[idx]
	for h := hs; h < he; h++ {
		row := plane[h*g.W+ws : h*g.W+we]
		for j, v := range row {
			if v > best || v != v {
				best, idx = v, h*g.W+ws+j
			}
		}
	}
	return idx, best
}

// MaxPoolForward computes y = max over each window of x.
func (b *Backend) MaxPoolForward(y, x *kernels.Tensor, p kernels.PoolParams) {
	b.check(y, "MaxPoolForward y")
	b.check(x, "MaxPoolForward x")
	g := newPoolGeom("MaxPoolForward", y, x, p)
	hw, pq := g.H*g.W, g.P*g.Q
	b.parallel(g.N*g.C, 1, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			plane, out := x.Host[pl*hw:(pl+1)*hw], y.Host[pl*pq:(pl+1)*pq]
			for oh := range g.P {
				for ow := range g.Q {
					_, out[oh*g.Q+ow] = g.argmax(plane, oh, ow)
				}
			}
			roundSlice(y.DType, out)
		}
	})
}

// MaxPoolBackward routes dy to the argmax of each window (recomputed from
// x); overlapping windows add up in a fixed order.
func (b *Backend) MaxPoolBackward(dx, dy, x *kernels.Tensor, p kernels.PoolParams) {
	b.check(dx, "MaxPoolBackward dx")
	b.check(dy, "MaxPoolBackward dy")
	b.check(x, "MaxPoolBackward x")
	g := newPoolGeom("MaxPoolBackward", dy, x, p)
	wantShape("MaxPoolBackward", "dx", dx, x.Shape...)
	hw, pq := g.H*g.W, g.P*g.Q
	b.parallel(g.N*g.C, 1, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			plane, grad, out := x.Host[pl*hw:(pl+1)*hw], dy.Host[pl*pq:(pl+1)*pq], dx.Host[pl*hw:(pl+1)*hw]
			clear(out)
			for oh := range g.P {
				for ow := range g.Q {
					i, _ := g.argmax(plane, oh, ow)
					out[i] += grad[oh*g.Q+ow]
				}
			}
			roundSlice(dx.DType, out)
		}
	})
}

// GlobalAvgPoolForward computes y[n,c] = mean over H,W of x[n,c].
func (b *Backend) GlobalAvgPoolForward(y, x *kernels.Tensor) {
	b.check(y, "GlobalAvgPoolForward y")
	b.check(x, "GlobalAvgPoolForward x")
	n, c, h, w := dims4("GlobalAvgPoolForward", "x", x)
	wantShape("GlobalAvgPoolForward", "y", y, n, c)
	hw := h * w
	b.parallel(n*c, 64, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			var s float64
			for _, v := range x.Host[pl*hw : (pl+1)*hw] {
				s += float64(v)
			}
			y.Host[pl] = roundTo(y.DType, float32(s/float64(hw)))
		}
	})
}

// GlobalAvgPoolBackward spreads dy[n,c]/(H*W) over dx[n,c].
func (b *Backend) GlobalAvgPoolBackward(dx, dy *kernels.Tensor) {
	b.check(dx, "GlobalAvgPoolBackward dx")
	b.check(dy, "GlobalAvgPoolBackward dy")
	n, c, h, w := dims4("GlobalAvgPoolBackward", "dx", dx)
	wantShape("GlobalAvgPoolBackward", "dy", dy, n, c)
	hw := h * w
	b.parallel(n*c, 64, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			v := roundTo(dx.DType, dy.Host[pl]/float32(hw))
			out := dx.Host[pl*hw : (pl+1)*hw]
			for i := range out {
				out[i] = v
			}
		}
	})
}
