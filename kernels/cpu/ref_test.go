package cpu

// Deliberately naive float64 reference implementations: direct loops over
// the textbook definitions, sharing no code with the backend.

import "math"

type convShape struct{ N, C, H, W, K, R, S, stride, pad int }

func (s convShape) P() int { return (s.H+2*s.pad-s.R)/s.stride + 1 }
func (s convShape) Q() int { return (s.W+2*s.pad-s.S)/s.stride + 1 }

func refConv(s convShape, x, w []float64) []float64 {
	P, Q := s.P(), s.Q()
	y := make([]float64, s.N*s.K*P*Q)
	for n := 0; n < s.N; n++ {
		for k := 0; k < s.K; k++ {
			for p := 0; p < P; p++ {
				for q := 0; q < Q; q++ {
					var acc float64
					for c := 0; c < s.C; c++ {
						for r := 0; r < s.R; r++ {
							for t := 0; t < s.S; t++ {
								h, ww := p*s.stride-s.pad+r, q*s.stride-s.pad+t
								if h < 0 || h >= s.H || ww < 0 || ww >= s.W {
									continue
								}
								acc += x[((n*s.C+c)*s.H+h)*s.W+ww] * w[((k*s.C+c)*s.R+r)*s.S+t]
							}
						}
					}
					y[((n*s.K+k)*P+p)*Q+q] = acc
				}
			}
		}
	}
	return y
}

// refConvBackward returns dx and dw by scattering every product of the
// forward sum.
func refConvBackward(s convShape, dy, x, w []float64) (dx, dw []float64) {
	P, Q := s.P(), s.Q()
	dx = make([]float64, len(x))
	dw = make([]float64, len(w))
	for n := 0; n < s.N; n++ {
		for k := 0; k < s.K; k++ {
			for p := 0; p < P; p++ {
				for q := 0; q < Q; q++ {
					g := dy[((n*s.K+k)*P+p)*Q+q]
					for c := 0; c < s.C; c++ {
						for r := 0; r < s.R; r++ {
							for t := 0; t < s.S; t++ {
								h, ww := p*s.stride-s.pad+r, q*s.stride-s.pad+t
								if h < 0 || h >= s.H || ww < 0 || ww >= s.W {
									continue
								}
								xi := ((n*s.C+c)*s.H+h)*s.W + ww
								wi := ((k*s.C+c)*s.R+r)*s.S + t
								dx[xi] += g * w[wi]
								dw[wi] += g * x[xi]
							}
						}
					}
				}
			}
		}
	}
	return dx, dw
}

// refBNTrain returns y, the batch mean, the biased variance per channel.
func refBNTrain(x, gamma, beta []float64, n, c, hw int, eps float64) (y, mean, variance []float64) {
	y = make([]float64, len(x))
	mean = make([]float64, c)
	variance = make([]float64, c)
	m := float64(n * hw)
	for ch := 0; ch < c; ch++ {
		for i := 0; i < n; i++ {
			for j := 0; j < hw; j++ {
				mean[ch] += x[(i*c+ch)*hw+j] / m
			}
		}
		for i := 0; i < n; i++ {
			for j := 0; j < hw; j++ {
				d := x[(i*c+ch)*hw+j] - mean[ch]
				variance[ch] += d * d / m
			}
		}
		sd := math.Sqrt(variance[ch] + eps)
		for i := 0; i < n; i++ {
			for j := 0; j < hw; j++ {
				k := (i*c+ch)*hw + j
				y[k] = (x[k]-mean[ch])/sd*gamma[ch] + beta[ch]
			}
		}
	}
	return y, mean, variance
}

func refMaxPool(x []float64, n, c, h, w, k, stride, pad int) []float64 {
	P, Q := (h+2*pad-k)/stride+1, (w+2*pad-k)/stride+1
	y := make([]float64, n*c*P*Q)
	for pl := 0; pl < n*c; pl++ {
		for p := 0; p < P; p++ {
			for q := 0; q < Q; q++ {
				best := math.Inf(-1)
				for r := 0; r < k; r++ {
					for t := 0; t < k; t++ {
						hh, ww := p*stride-pad+r, q*stride-pad+t
						if hh >= 0 && hh < h && ww >= 0 && ww < w {
							best = math.Max(best, x[(pl*h+hh)*w+ww])
						}
					}
				}
				y[(pl*P+p)*Q+q] = best
			}
		}
	}
	return y
}

func refAvgPool(x []float64, nc, hw int) []float64 {
	y := make([]float64, nc)
	for i := range y {
		for j := 0; j < hw; j++ {
			y[i] += x[i*hw+j]
		}
		y[i] /= float64(hw)
	}
	return y
}

func refLinear(x, w, b []float64, n, in, out int) []float64 {
	y := make([]float64, n*out)
	for i := 0; i < n; i++ {
		for o := 0; o < out; o++ {
			acc := b[o]
			for j := 0; j < in; j++ {
				acc += x[i*in+j] * w[o*in+j]
			}
			y[i*out+o] = acc
		}
	}
	return y
}

// refCE returns the mean cross-entropy of logits [n,k] against labels.
func refCE(z []float64, labels []int, n, k int) float64 {
	var total float64
	for i := 0; i < n; i++ {
		var s float64
		for j := 0; j < k; j++ {
			s += math.Exp(z[i*k+j])
		}
		total += math.Log(s) - z[i*k+labels[i]]
	}
	return total / float64(n)
}

func refGemm(M, N, K int, a, b []float64) []float64 {
	c := make([]float64, M*N)
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			for p := 0; p < K; p++ {
				c[i*N+j] += a[i*K+p] * b[p*N+j]
			}
		}
	}
	return c
}
