package graphtest

import "resnetlab/kernels"

// The optional fused BN+ReLU ops are recorded like the plain ones, so a
// model on a Recorder over a backend that fuses is captured fused, as on a
// GPU.

var _ kernels.FusedBN = (*Recorder)(nil)

// FusedBNAvailable reports whether the wrapped backend fuses now.
func (r *Recorder) FusedBNAvailable() bool { return kernels.FusedBNOf(r.Backend) != nil }

func (r *Recorder) BatchNormActForward(y, x, res, gamma, beta, runMean, runVar, saveMean, saveInvStd *kernels.Tensor, training bool, momentum, eps float32) {
	f := kernels.FusedBNOf(r.Backend)
	r.do(func() {
		f.BatchNormActForward(y, x, res, gamma, beta, runMean, runVar, saveMean, saveInvStd, training, momentum, eps)
	})
}

func (r *Recorder) BatchNormActBackward(dx, ds, dgamma, dbeta, dy, y, x, gamma, saveMean, saveInvStd *kernels.Tensor) {
	f := kernels.FusedBNOf(r.Backend)
	r.do(func() { f.BatchNormActBackward(dx, ds, dgamma, dbeta, dy, y, x, gamma, saveMean, saveInvStd) })
}
