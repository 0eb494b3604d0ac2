package runner

import "resnetlab/kernels"

// inputBuf uploads host batches into a model-dtype tensor. Device backends
// receive fp32 and cast on the device (round to nearest even, as the host
// conversion does, so the values are identical): converting ~300k values on
// the host every step cost more than the whole fp16 step on an H200.
type inputBuf struct{ f32 *kernels.Tensor }

func (b *inputBuf) upload(be kernels.Backend, x *kernels.Tensor, host []float32) {
	if x.DType == kernels.F32 || be.Name() == "cpu" {
		be.Upload(x, host)
		return
	}
	if b.f32 == nil || b.f32.Len() != x.Len() {
		b.free(be)
		b.f32 = be.New(kernels.CatData, kernels.F32, x.Shape...)
	}
	be.Upload(b.f32, host)
	be.Copy(x, b.f32)
}

func (b *inputBuf) free(be kernels.Backend) {
	if b.f32 != nil {
		be.Free(b.f32)
		b.f32 = nil
	}
}
