package cpu

import (
	"fmt"

	"resnetlab/kernels"
)

func linearDims(op string, x, w *kernels.Tensor) (n, in, out int) {
	if len(x.Shape) != 2 || len(w.Shape) != 2 || x.Shape[1] != w.Shape[1] {
		panic(fmt.Sprintf("cpu: %s: x %v and w %v do not match (want x [N,I], w [O,I])", op, x.Shape, w.Shape))
	}
	return x.Shape[0], x.Shape[1], w.Shape[0]
}

// LinearForward computes y[N,O] = x[N,I] * w[O,I]^T + b[O].
func (b *Backend) LinearForward(y, x, w, bias *kernels.Tensor) {
	for _, t := range []*kernels.Tensor{y, x, w, bias} {
		b.check(t, "LinearForward")
	}
	n, in, out := linearDims("LinearForward", x, w)
	wantShape("LinearForward", "y", y, n, out)
	wantShape("LinearForward", "b", bias, out)
	defer b.releaseScratch()
	b.gemm(n, out, in, matrix{data: x.Host, ld: in}, matrix{data: w.Host, ld: in, t: true}, y.Host, out, false)
	for i := range n {
		row := y.Host[i*out : (i+1)*out]
		for j, v := range bias.Host {
			row[j] += v
		}
	}
	b.round(y)
}

// LinearBackward computes dx = dy*w (skipped if dx is nil), dw = dy^T*x and
// db = sum over the batch of dy (in float64, in batch order).
func (b *Backend) LinearBackward(dx, dw, db, dy, x, w *kernels.Tensor) {
	for _, t := range []*kernels.Tensor{dw, db, dy, x, w} {
		b.check(t, "LinearBackward")
	}
	n, in, out := linearDims("LinearBackward", x, w)
	wantShape("LinearBackward", "dy", dy, n, out)
	wantShape("LinearBackward", "dw", dw, out, in)
	wantShape("LinearBackward", "db", db, out)
	defer b.releaseScratch()
	if dx != nil {
		b.check(dx, "LinearBackward dx")
		wantShape("LinearBackward", "dx", dx, n, in)
		b.gemm(n, in, out, matrix{data: dy.Host, ld: out}, matrix{data: w.Host, ld: in}, dx.Host, in, false)
		b.round(dx)
	}
	b.gemm(out, in, n, matrix{data: dy.Host, ld: out, t: true}, matrix{data: x.Host, ld: in}, dw.Host, in, false)
	b.round(dw)
	for j := range out {
		var s float64
		for i := range n {
			s += float64(dy.Host[i*out+j])
		}
		db.Host[j] = float32(s)
	}
	b.round(db)
}
