package cuda

import (
	"sync"

	"resnetlab/kernels"
)

// Naive float64 convolution loops: the independent reference for the
// convolution tests (direct definitions, one goroutine per image).

func convOut(c convCase) (int, int) {
	return kernels.OutSize(c.h, c.r, c.stride, c.pad), kernels.OutSize(c.w, c.s, c.stride, c.pad)
}

// forEachTap calls f for every (n,k,c,p,q,r,s) whose input pixel is inside
// the image, with flat indices of x, w and y.
func forEachTap(cc convCase, n int, f func(xi, wi, yi int)) {
	P, Q := convOut(cc)
	for k := 0; k < cc.k; k++ {
		for c := 0; c < cc.c; c++ {
			for p := 0; p < P; p++ {
				for q := 0; q < Q; q++ {
					yi := ((n*cc.k+k)*P+p)*Q + q
					for r := 0; r < cc.r; r++ {
						h := p*cc.stride - cc.pad + r
						if h < 0 || h >= cc.h {
							continue
						}
						for s := 0; s < cc.s; s++ {
							w := q*cc.stride - cc.pad + s
							if w < 0 || w >= cc.w {
								continue
							}
							f(((n*cc.c+c)*cc.h+h)*cc.w+w, ((k*cc.c+c)*cc.r+r)*cc.s+s, yi)
						}
					}
				}
			}
		}
	}
}

// parallelImages runs f(n, acc) per image with a private float64 buffer of
// size m and returns the sum of the buffers in image order.
func parallelImages(cc convCase, m int, f func(n int, acc []float64)) []float32 {
	bufs := make([][]float64, cc.n)
	var wg sync.WaitGroup
	for n := 0; n < cc.n; n++ {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			bufs[n] = make([]float64, m)
			f(n, bufs[n])
		}(n)
	}
	wg.Wait()
	out := make([]float32, m)
	for i := range out {
		var s float64
		for n := range bufs {
			s += bufs[n][i]
		}
		out[i] = float32(s)
	}
	return out
}

func naiveFwd(cc convCase, x, w []float32) []float32 {
	P, Q := convOut(cc)
	return parallelImages(cc, cc.n*cc.k*P*Q, func(n int, acc []float64) {
		forEachTap(cc, n, func(xi, wi, yi int) { acc[yi] += float64(x[xi]) * float64(w[wi]) })
	})
}

func naiveDgrad(cc convCase, dy, w []float32) []float32 {
	return parallelImages(cc, cc.n*cc.c*cc.h*cc.w, func(n int, acc []float64) {
		forEachTap(cc, n, func(xi, wi, yi int) { acc[xi] += float64(dy[yi]) * float64(w[wi]) })
	})
}

func naiveWgrad(cc convCase, dy, x []float32) []float32 {
	return parallelImages(cc, cc.k*cc.c*cc.r*cc.s, func(n int, acc []float64) {
		forEachTap(cc, n, func(xi, wi, yi int) { acc[wi] += float64(dy[yi]) * float64(x[xi]) })
	})
}
