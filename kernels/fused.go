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
