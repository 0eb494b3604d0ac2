package model

import (
	"slices"

	"resnetlab/kernels"
)

// ensure returns *t when it already has this dtype and shape, else frees it
// and allocates a new activation tensor. Activation buffers therefore live
// across steps and are reallocated only when the batch size changes.
func ensure(be kernels.Backend, t **kernels.Tensor, dt kernels.DType, shape ...int) *kernels.Tensor {
	if *t != nil && (*t).DType == dt && slices.Equal((*t).Shape, shape) {
		return *t
	}
	release(be, t)
	*t = be.New(kernels.CatActivations, dt, shape...)
	return *t
}

// ensureLike is ensure with the dtype and shape of ref.
func ensureLike(be kernels.Backend, t **kernels.Tensor, ref *kernels.Tensor) *kernels.Tensor {
	return ensure(be, t, ref.DType, ref.Shape...)
}

// release frees *t if set and clears it.
func release(be kernels.Backend, t **kernels.Tensor) {
	if *t != nil {
		be.Free(*t)
		*t = nil
	}
}

// newParam allocates a weight and its gradient of the same dtype and shape.
func newParam(be kernels.Backend, name string, dt kernels.DType, shape ...int) *Param {
	return &Param{
		Name: name,
		W:    be.New(kernels.CatParams, dt, shape...),
		G:    be.New(kernels.CatGrads, dt, shape...),
	}
}
