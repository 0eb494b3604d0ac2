package kernels

// Optional fused operations. A backend that implements one of these
// interfaces does the work with fewer launches or host waits; the helpers
// below fall back to the plain Backend ops otherwise, with the same results.

// AdamCopier is a backend whose Adam step can also write each updated
// parameter, rounded to the copy's dtype, into copies[i] (nil: none) in the
// same pass: the low-precision model weights of mixed-precision training,
// without a cast per tensor afterwards.
type AdamCopier interface {
	AdamStepCopy(params, grads, m, v, copies []*Tensor, hp AdamParams)
}

// AdamStepCopy is AdamStep followed by Copy(copies[i], params[i]) for every
// non-nil copy, fused where the backend can.
func AdamStepCopy(be Backend, params, grads, m, v, copies []*Tensor, hp AdamParams) {
	if c, ok := be.(AdamCopier); ok {
		c.AdamStepCopy(params, grads, m, v, copies, hp)
		return
	}
	be.AdamStep(params, grads, m, v, hp)
	for i, c := range copies {
		if c != nil {
			be.Copy(c, params[i])
		}
	}
}

// LossReader is a backend that can bring a step's loss (an fp32 scalar)
// and the inf/NaN check of its gradients to the host with one wait for the
// device instead of two.
type LossReader interface {
	LossAndNonFinite(loss *Tensor, ts []*Tensor) (float32, bool)
}

// LossAndNonFinite returns loss[0] and whether any element of ts is inf or
// NaN, fused where the backend can.
func LossAndNonFinite(be Backend, loss *Tensor, ts []*Tensor) (float32, bool) {
	if r, ok := be.(LossReader); ok {
		return r.LossAndNonFinite(loss, ts)
	}
	var h [1]float32
	be.Download(loss, h[:])
	return h[0], be.NonFinite(ts)
}

// FusedBN is a backend that can fuse a batch norm with the ReLU after it
// and, in a residual block, with the add before that ReLU: one launch and
// one pass over memory instead of two or three. Results are exactly those
// of the separate ops (see the methods), so a model may use the fused ops
// wherever FusedBNOf returns them.
type FusedBN interface {
	// FusedBNAvailable reports whether the fused ops can run now (a
	// wrapper, such as graphtest's recorder, may not offer them).
	FusedBNAvailable() bool
	// BatchNormActForward is BatchNormForward(y, x, ...), then, when res is
	// not nil, Add(y, y, res), then ReLUForward(y, y): every step rounds
	// to y's dtype exactly as the separate op does. The sum is y + res,
	// which IEEE addition makes equal to res + y bit for bit (only the
	// payload of a NaN may differ where both summands are NaN). y aliases
	// neither x nor res.
	BatchNormActForward(y, x, res, gamma, beta, runMean, runVar, saveMean, saveInvStd *Tensor, training bool, momentum, eps float32)
	// BatchNormActBackward is ReLUBackward(ds, dy, y) — the masked
	// gradient in y's dtype — then BatchNormBackward(dx, dgamma, dbeta, ds,
	// x, gamma, saveMean, saveInvStd), with y the output of the
	// BatchNormActForward being differentiated. ds (y's dtype and length)
	// receives the masked gradient when not nil (a residual block's
	// shortcut needs it); dx aliases none of the inputs.
	BatchNormActBackward(dx, ds, dgamma, dbeta, dy, y, x, gamma, saveMean, saveInvStd *Tensor)
}

// FusedBNOf returns be's fused batch-norm ops when it has them and they are
// available now, else nil (use the separate ops).
func FusedBNOf(be Backend) FusedBN {
	if f, ok := be.(FusedBN); ok && f.FusedBNAvailable() {
		return f
	}
	return nil
}
