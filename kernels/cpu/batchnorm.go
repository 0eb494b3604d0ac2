package cpu

import (
	"fmt"
	"math"

	"resnetlab/kernels"
)

// bnDims validates the tensors of a batch norm and returns N, C, H*W.
func bnDims(op string, x *kernels.Tensor, perChannel ...*kernels.Tensor) (n, c, hw int) {
	n, c, h, w := dims4(op, "x", x)
	for _, t := range perChannel {
		if t != nil && t.Len() != c {
			panic(fmt.Sprintf("cpu: %s: per-channel tensor %v has %d elements (want %d channels)", op, t, t.Len(), c))
		}
	}
	return n, c, h * w
}

// BatchNormForward normalises x per channel over N,H,W. In training it uses
// the batch mean and biased variance (saving mean and 1/sqrt(var+eps)) and
// updates the running stats with the unbiased variance, as PyTorch does.
// Sums run in float64 per channel, one channel per goroutine at a time.
func (b *Backend) BatchNormForward(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd *kernels.Tensor, training bool, momentum, eps float32) {
	b.bnForward("BatchNormForward", y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, training, momentum, eps, nil)
}

// bnForward is BatchNormForward; a non-nil epi runs on each freshly
// written and rounded slice of y, with the slice's offset (the fused
// add/ReLU of BatchNormActForward).
func (b *Backend) bnForward(op string, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd *kernels.Tensor, training bool, momentum, eps float32, epi func(dst []float32, off int)) {
	for _, t := range []*kernels.Tensor{y, x, gamma, beta, runMean, runVar} {
		b.check(t, op)
	}
	if training {
		b.check(saveMean, op+" saveMean")
		b.check(saveInvStd, op+" saveInvStd")
	}
	sameLen(op, y, x)
	n, c, hw := bnDims(op, x, gamma, beta, runMean, runVar, saveMean, saveInvStd)
	count := n * hw
	xs, ys := x.Host, y.Host
	b.parallel(c, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			var mean, invstd float32
			if training {
				m, v := channelMeanVar(xs, ch, n, c, hw)
				invstd = float32(1 / math.Sqrt(v+float64(eps)))
				mean = float32(m)
				saveMean.Host[ch], saveInvStd.Host[ch] = mean, invstd
				unbiased := v
				if count > 1 {
					unbiased = v * float64(count) / float64(count-1)
				}
				mom := float64(momentum)
				runMean.Host[ch] = float32((1-mom)*float64(runMean.Host[ch]) + mom*m)
				runVar.Host[ch] = float32((1-mom)*float64(runVar.Host[ch]) + mom*unbiased)
			} else {
				mean = runMean.Host[ch]
				invstd = float32(1 / math.Sqrt(float64(runVar.Host[ch])+float64(eps)))
			}
			a, sh := gamma.Host[ch]*invstd, beta.Host[ch]
			for i := range n {
				off := (i*c + ch) * hw
				src, dst := xs[off:off+hw], ys[off:off+hw]
				for j, v := range src {
					dst[j] = (v-mean)*a + sh
				}
				roundSlice(y.DType, dst)
				if epi != nil {
					epi(dst, off)
				}
			}
		}
	})
}

// channelMeanVar returns the mean and biased variance of one channel
// (two passes in float64).
func channelMeanVar(x []float32, ch, n, c, hw int) (mean, variance float64) {
	var s float64
	for i := range n {
		s += sum64(x[(i*c+ch)*hw : (i*c+ch+1)*hw])
	}
	mean = s / float64(n*hw)
	var q float64
	for i := range n {
		q += sqDev64(x[(i*c+ch)*hw:(i*c+ch+1)*hw], mean)
	}
	return mean, q / float64(n*hw)
}

// sum64 sums in float64 with four interleaved accumulators (to hide the
// add latency), combined in a fixed order.
func sum64(v []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(v); i += 4 {
		w := (*[4]float32)(v[i:])
		s0 += float64(w[0])
		s1 += float64(w[1])
		s2 += float64(w[2])
		s3 += float64(w[3])
	}
	for ; i < len(v); i++ {
		s0 += float64(v[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// sqDev64 is the sum of (v-mean)^2 in float64, like sum64.
func sqDev64(v []float32, mean float64) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(v); i += 4 {
		w := (*[4]float32)(v[i:])
		d0, d1, d2, d3 := float64(w[0])-mean, float64(w[1])-mean, float64(w[2])-mean, float64(w[3])-mean
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(v); i++ {
		d := float64(v[i]) - mean
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

// BatchNormBackward computes dgamma = sum(dy*xhat), dbeta = sum(dy) and
// dx = gamma*invstd*(dy - dbeta/M - xhat*dgamma/M), M = N*H*W.
func (b *Backend) BatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd *kernels.Tensor) {
	const op = "BatchNormBackward"
	for _, t := range []*kernels.Tensor{dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd} {
		b.check(t, op)
	}
	sameLen(op, dx, x)
	sameLen(op, dy, x)
	b.bnBackward(op, dx, dgamma, dbeta, x, gamma, saveMean, saveInvStd, func(_ []float32, off, hw int) []float32 {
		return dy.Host[off : off+hw]
	})
}

// bnBackward is BatchNormBackward with the gradient dy read slice by slice
// through grad(scratch, off, hw): dy itself, or for BatchNormActBackward
// the ReLU-masked gradient, which it may build in scratch (hw floats, one
// per goroutine). grad is called twice per slice (once per pass) and must
// return the same values both times.
func (b *Backend) bnBackward(op string, dx, dgamma, dbeta, x, gamma, saveMean, saveInvStd *kernels.Tensor, grad func(scratch []float32, off, hw int) []float32) {
	n, c, hw := bnDims(op, x, dgamma, dbeta, gamma, saveMean, saveInvStd)
	inv := 1 / float64(n*hw)
	b.parallel(c, 1, func(lo, hi int) {
		scratch := make([]float32, hw)
		for ch := lo; ch < hi; ch++ {
			mean, invstd := saveMean.Host[ch], saveInvStd.Host[ch]
			var sdy, sdyx float64
			for i := range n {
				off := (i*c + ch) * hw
				xs := x.Host[off : off+hw]
				for j, g := range grad(scratch, off, hw) {
					sdy += float64(g)
					sdyx += float64(g) * float64((xs[j]-mean)*invstd)
				}
			}
			dgamma.Host[ch], dbeta.Host[ch] = float32(sdyx), float32(sdy)
			k := gamma.Host[ch] * invstd
			mdb, mdg := float32(sdy*inv), float32(sdyx*inv)
			for i := range n {
				off := (i*c + ch) * hw
				xs, gs, out := x.Host[off:off+hw], grad(scratch, off, hw), dx.Host[off:off+hw]
				for j, g := range gs {
					out[j] = k * (g - mdb - (xs[j]-mean)*invstd*mdg)
				}
				roundSlice(dx.DType, out)
			}
		}
	})
	b.round(dgamma)
	b.round(dbeta)
}
