package graphtest

import "resnetlab/kernels"

// Every op of kernels.Backend is listed here, so none slips past the
// recording through the embedded backend.

// New allocates now; its zero fill is part of the graph, as a CUDA
// backend's memset is.
func (r *Recorder) New(cat kernels.Category, dt kernels.DType, shape ...int) *kernels.Tensor {
	t := r.Backend.New(cat, dt, shape...)
	if r.capturing {
		r.ops = append(r.ops, func() { r.Backend.Fill(t, 0) })
	}
	return t
}

func (r *Recorder) Upload(dst *kernels.Tensor, src []float32) {
	r.refuse("Upload")
	r.Backend.Upload(dst, src)
}

func (r *Recorder) Download(src *kernels.Tensor, dst []float32) {
	r.refuse("Download")
	r.Backend.Download(src, dst)
}

func (r *Recorder) NonFinite(ts []*kernels.Tensor) bool {
	r.refuse("NonFinite")
	return r.Backend.NonFinite(ts)
}

// Sync fails inside a capture, as the CUDA backend's does.
func (r *Recorder) Sync() error {
	if r.capturing {
		return errSync
	}
	return r.Backend.Sync()
}

func (r *Recorder) Copy(dst, src *kernels.Tensor) { r.do(func() { r.Backend.Copy(dst, src) }) }
func (r *Recorder) Fill(t *kernels.Tensor, v float32) {
	r.do(func() { r.Backend.Fill(t, v) })
}

func (r *Recorder) Conv2dForward(y, x, w *kernels.Tensor, p kernels.ConvParams) {
	r.do(func() { r.Backend.Conv2dForward(y, x, w, p) })
}

func (r *Recorder) Conv2dBackward(dx, dw, dy, x, w *kernels.Tensor, p kernels.ConvParams) {
	r.do(func() { r.Backend.Conv2dBackward(dx, dw, dy, x, w, p) })
}

func (r *Recorder) BatchNormForward(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd *kernels.Tensor, training bool, momentum, eps float32) {
	r.do(func() {
		r.Backend.BatchNormForward(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, training, momentum, eps)
	})
}

func (r *Recorder) BatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd *kernels.Tensor) {
	r.do(func() { r.Backend.BatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd) })
}

func (r *Recorder) ReLUForward(y, x *kernels.Tensor) { r.do(func() { r.Backend.ReLUForward(y, x) }) }
func (r *Recorder) ReLUBackward(dx, dy, y *kernels.Tensor) {
	r.do(func() { r.Backend.ReLUBackward(dx, dy, y) })
}
func (r *Recorder) Add(y, a, b *kernels.Tensor)        { r.do(func() { r.Backend.Add(y, a, b) }) }
func (r *Recorder) Scale(t *kernels.Tensor, s float32) { r.do(func() { r.Backend.Scale(t, s) }) }

func (r *Recorder) MaxPoolForward(y, x *kernels.Tensor, p kernels.PoolParams) {
	r.do(func() { r.Backend.MaxPoolForward(y, x, p) })
}

func (r *Recorder) MaxPoolBackward(dx, dy, x *kernels.Tensor, p kernels.PoolParams) {
	r.do(func() { r.Backend.MaxPoolBackward(dx, dy, x, p) })
}

func (r *Recorder) GlobalAvgPoolForward(y, x *kernels.Tensor) {
	r.do(func() { r.Backend.GlobalAvgPoolForward(y, x) })
}

func (r *Recorder) GlobalAvgPoolBackward(dx, dy *kernels.Tensor) {
	r.do(func() { r.Backend.GlobalAvgPoolBackward(dx, dy) })
}

func (r *Recorder) LinearForward(y, x, w, b *kernels.Tensor) {
	r.do(func() { r.Backend.LinearForward(y, x, w, b) })
}

func (r *Recorder) LinearBackward(dx, dw, db, dy, x, w *kernels.Tensor) {
	r.do(func() { r.Backend.LinearBackward(dx, dw, db, dy, x, w) })
}

func (r *Recorder) SoftmaxCrossEntropy(loss, dlogits, logits, labels *kernels.Tensor, scale float32) {
	r.do(func() { r.Backend.SoftmaxCrossEntropy(loss, dlogits, logits, labels, scale) })
}

// AdamStep copies the slices: a caller may reuse them after the call.
func (r *Recorder) AdamStep(params, grads, m, v []*kernels.Tensor, hp kernels.AdamParams) {
	p, g, mm, vv := clone(params), clone(grads), clone(m), clone(v)
	r.do(func() { r.Backend.AdamStep(p, g, mm, vv, hp) })
}

func clone(ts []*kernels.Tensor) []*kernels.Tensor { return append([]*kernels.Tensor(nil), ts...) }

// Batching from a resident data set (kernels.Batcher) uploads the crops,
// so the CUDA backend refuses it inside a capture; so does this one.

func (r *Recorder) UploadImages(images []uint8, n, c, h, w int) (*kernels.Images, error) {
	r.refuse("UploadImages")
	return r.batcher().UploadImages(images, n, c, h, w)
}

func (r *Recorder) FreeImages(s *kernels.Images) { r.batcher().FreeImages(s) }

func (r *Recorder) AugmentBatch(x *kernels.Tensor, src *kernels.Images, crops []kernels.Crop, pad int) {
	r.refuse("AugmentBatch")
	r.batcher().AugmentBatch(x, src, crops, pad)
}

func (r *Recorder) batcher() kernels.Batcher { return r.Backend.(kernels.Batcher) }
