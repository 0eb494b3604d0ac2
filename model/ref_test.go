package model

import (
	"fmt"
	"math"
)

// An independent float64 reference of torchvision's resnet18 forward,
// written from the architecture (not from the model's code): it reads the
// weights by state-dict key, so it also checks that every key is wired to
// the right layer, stride and padding.

type t4 struct {
	n, c, h, w int
	d          []float64
}

func newT4(n, c, h, w int) t4 { return t4{n, c, h, w, make([]float64, n*c*h*w)} }

func (t t4) at(n, c, y, x int) float64 { return t.d[((n*t.c+c)*t.h+y)*t.w+x] }

type refNet struct {
	sd    map[string]NamedTensor
	w     map[string][]float64 // float64 copies of sd's values, read by f
	train bool
	// stats receives the updated running statistics (train mode) by key.
	stats map[string][]float64
}

// newRefNet copies a state dict into a reference network.
func newRefNet(sd []NamedTensor, train bool) *refNet {
	r := &refNet{sd: map[string]NamedTensor{}, w: map[string][]float64{}, train: train}
	for _, e := range sd {
		r.sd[e.Name] = e
		w := make([]float64, len(e.Data))
		for i, v := range e.Data {
			w[i] = float64(v)
		}
		r.w[e.Name] = w
	}
	return r
}

// f returns the (read-only) values of key.
func (r *refNet) f(key string) []float64 {
	w, ok := r.w[key]
	if !ok {
		panic("reference: no key " + key)
	}
	return w
}

func (r *refNet) conv(x t4, key string, stride, pad int) t4 {
	sh := r.sd[key].Shape
	k, kh, kw := sh[0], sh[2], sh[3]
	w := r.f(key)
	y := newT4(x.n, k, (x.h+2*pad-kh)/stride+1, (x.w+2*pad-kw)/stride+1)
	for n := range x.n {
		for o := range k {
			for p := range y.h {
				for q := range y.w {
					s := 0.0
					for c := range x.c {
						for i := range kh {
							for j := range kw {
								yy, xx := p*stride-pad+i, q*stride-pad+j
								if yy >= 0 && yy < x.h && xx >= 0 && xx < x.w {
									s += x.at(n, c, yy, xx) * w[((o*x.c+c)*kh+i)*kw+j]
								}
							}
						}
					}
					y.d[((n*k+o)*y.h+p)*y.w+q] = s
				}
			}
		}
	}
	return y
}

func (r *refNet) bn(x t4, key string) t4 {
	g, b := r.f(key+".weight"), r.f(key+".bias")
	mean, vr := r.f(key+".running_mean"), r.f(key+".running_var")
	y := newT4(x.n, x.c, x.h, x.w)
	m := float64(x.n * x.h * x.w)
	for c := range x.c {
		mu, v := mean[c], vr[c]
		if r.train {
			s, s2 := 0.0, 0.0
			for n := range x.n {
				for i := range x.h * x.w {
					s += x.at(n, c, i/x.w, i%x.w)
				}
			}
			mu = s / m
			for n := range x.n {
				for i := range x.h * x.w {
					d := x.at(n, c, i/x.w, i%x.w) - mu
					s2 += d * d
				}
			}
			v = s2 / m
			r.stats[key+".running_mean"] = append(r.stats[key+".running_mean"], 0.9*mean[c]+0.1*mu)
			r.stats[key+".running_var"] = append(r.stats[key+".running_var"], 0.9*vr[c]+0.1*s2/(m-1))
		}
		for n := range x.n {
			for i := range x.h * x.w {
				j := ((n*x.c+c)*x.h)*x.w + i
				y.d[j] = (x.d[j]-mu)/math.Sqrt(v+1e-5)*g[c] + b[c]
			}
		}
	}
	return y
}

func relu(x t4) t4 {
	for i, v := range x.d {
		x.d[i] = math.Max(v, 0)
	}
	return x
}

func maxpool(x t4) t4 {
	y := newT4(x.n, x.c, (x.h+2-3)/2+1, (x.w+2-3)/2+1)
	for n := range x.n {
		for c := range x.c {
			for p := range y.h {
				for q := range y.w {
					best := math.Inf(-1)
					for i := range 3 {
						for j := range 3 {
							yy, xx := 2*p-1+i, 2*q-1+j
							if yy >= 0 && yy < x.h && xx >= 0 && xx < x.w {
								best = math.Max(best, x.at(n, c, yy, xx))
							}
						}
					}
					y.d[((n*x.c+c)*y.h+p)*y.w+q] = best
				}
			}
		}
	}
	return y
}

func (r *refNet) block(x t4, name string, stride int) t4 {
	o := relu(r.bn(r.conv(x, name+".conv1.weight", stride, 1), name+".bn1"))
	o = r.bn(r.conv(o, name+".conv2.weight", 1, 1), name+".bn2")
	id := x
	if _, ok := r.sd[name+".downsample.0.weight"]; ok {
		id = r.bn(r.conv(x, name+".downsample.0.weight", stride, 0), name+".downsample.1")
	}
	for i := range o.d {
		o.d[i] += id.d[i]
	}
	return relu(o)
}

// forward returns logits [n][classes].
func (r *refNet) forward(x t4) [][]float64 {
	r.stats = map[string][]float64{}
	o := maxpool(relu(r.bn(r.conv(x, "conv1.weight", 2, 3), "bn1")))
	for l := 1; l <= 4; l++ {
		for i := range 2 {
			stride := 1
			if l > 1 && i == 0 {
				stride = 2
			}
			o = r.block(o, fmt.Sprintf("layer%d.%d", l, i), stride)
		}
	}
	w, b := r.f("fc.weight"), r.f("fc.bias")
	classes := len(b)
	out := make([][]float64, o.n)
	for n := range o.n {
		out[n] = make([]float64, classes)
		for k := range classes {
			s := b[k]
			for c := range o.c {
				avg := 0.0
				for i := range o.h * o.w {
					avg += o.at(n, c, i/o.w, i%o.w)
				}
				s += avg / float64(o.h*o.w) * w[k*o.c+c]
			}
			out[n][k] = s
		}
	}
	return out
}
