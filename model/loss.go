package model

import "resnetlab/kernels"

// CrossEntropy is nn.CrossEntropyLoss (mean over the batch) with buffers
// kept across steps like the model's activations.
type CrossEntropy struct {
	be            kernels.Backend
	loss, dlogits *kernels.Tensor
	host          [1]float32
}

// NewCrossEntropy allocates the loss scalar.
func NewCrossEntropy(be kernels.Backend) *CrossEntropy {
	return &CrossEntropy{be: be, loss: be.New(kernels.CatActivations, kernels.F32, 1)}
}

// Forward computes the mean loss of logits [N,C] against labels [N] (class
// indices as float32). With grad it also returns dlogits = dLoss/dlogits *
// scale (scale is the loss scale; 1 without one), in the logits' dtype.
func (c *CrossEntropy) Forward(logits, labels *kernels.Tensor, scale float32, grad bool) (loss, dlogits *kernels.Tensor) {
	if grad {
		dlogits = ensureLike(c.be, &c.dlogits, logits)
	}
	c.be.SoftmaxCrossEntropy(c.loss, dlogits, logits, labels, scale)
	return c.loss, dlogits
}

// Value downloads the last loss (this waits for the device).
func (c *CrossEntropy) Value() float32 {
	c.be.Download(c.loss, c.host[:])
	return c.host[0]
}

// Loss is the device scalar the last Forward wrote (fp32, one element).
func (c *CrossEntropy) Loss() *kernels.Tensor { return c.loss }

// Free releases the buffers.
func (c *CrossEntropy) Free() {
	release(c.be, &c.loss)
	release(c.be, &c.dlogits)
}
