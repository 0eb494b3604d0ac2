package engine

import (
	"resnetlab/kernels"
)

// direct is mixed-precision DDP's Adam over per-parameter views of the flat
// master, gradient and moment buffers, so that one fused call
// (kernels.AdamStepCopy) updates the fp32 masters and writes the model's
// fp16/bf16 weights: no cast per tensor after Adam. The model's fp32
// parameters (batch norm) are rebound to views of the master buffer, so
// they need no copy at all.
//
// On one rank with a single micro-batch ("on"), Adam also reads the model's
// own gradients (fp16/bf16 conv and fc, fp32 batch norm) instead of their
// fp32 gather into the flat buffer: the cast is exact, so the result is the
// same bit for bit, and the step saves a copy per parameter. Several ranks
// (the all-reduce wants the flat buffer) and gradient accumulation (it sums
// micro-batches there) keep the gather.
type direct struct {
	possible bool // one rank and not EngineConfig.NoDirect
	on       bool // this step reads the model's gradients

	p, m, v []*kernels.Tensor // views of master, m, v per parameter
	gFlat   []*kernels.Tensor // views of the flat gradient buffer
	gModel  []*kernels.Tensor // the model's gradients
	copies  []*kernels.Tensor // the model's low-precision weights; nil for rebound fp32 ones
}

// newDirect builds the views and rebinds the fp32 parameters; the master
// buffer must already hold the weights.
func (e *Engine) newDirect() *direct {
	l := e.lay
	d := &direct{possible: l.world == 1 && !e.cfg.NoDirect}
	for i, p := range e.params {
		off, n := l.offs[i], p.W.Len()
		d.p = append(d.p, kernels.View(e.master, off, n))
		d.m = append(d.m, kernels.View(e.m, off, n))
		d.v = append(d.v, kernels.View(e.v, off, n))
		d.gFlat = append(d.gFlat, kernels.View(e.grad, off, n))
		d.gModel = append(d.gModel, flatView(p.G))
		var c *kernels.Tensor
		if p.W.DType == kernels.F32 {
			old := p.W
			p.W = kernels.View(e.master, off, old.Shape...)
			e.be.Free(old)
		} else {
			c = flatView(p.W)
		}
		d.copies = append(d.copies, c)
	}
	return d
}

// setDirect decides whether this step of n micro-batches reads the model's
// gradients directly.
func (e *Engine) setDirect(n int) {
	if e.direct != nil {
		e.direct.on = e.direct.possible && n == 1
	}
}

// checkedGrads are the gradients the overflow check reads: those Adam reads.
func (e *Engine) checkedGrads() []*kernels.Tensor {
	if e.direct != nil && e.direct.on {
		return e.direct.gModel
	}
	return e.ownedGrads()
}

func (d *direct) adam(be kernels.Backend, hp kernels.AdamParams) {
	gs := d.gFlat
	if d.on {
		gs = d.gModel
	}
	kernels.AdamStepCopy(be, d.p, gs, d.m, d.v, d.copies, hp)
}
