package cuda

import (
	"fmt"
	"unsafe"

	"resnetlab/kernels"
)

// owns panics unless every non-nil tensor belongs to b and is not freed.
func (b *Backend) owns(op string, ts ...*kernels.Tensor) {
	for i, t := range ts {
		if t == nil {
			continue
		}
		if t.Owner != kernels.Backend(b) {
			panic(fmt.Sprintf("cuda: %s: operand %d %v belongs to another backend", op, i, t))
		}
		if t.Dev == 0 && t.Len() > 0 {
			panic(fmt.Sprintf("cuda: %s: operand %d %v was freed", op, i, t))
		}
	}
}

// sameLen panics unless all tensors have the same number of elements.
func sameLen(op string, ts ...*kernels.Tensor) int {
	n := ts[0].Len()
	for _, t := range ts[1:] {
		if t.Len() != n {
			panic(fmt.Sprintf("cuda: %s: %v and %v differ in length", op, ts[0], t))
		}
	}
	return n
}

func needShape(op, what string, t *kernels.Tensor, want ...int) {
	ok := len(t.Shape) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = t.Shape[i] == want[i]
	}
	if !ok {
		panic(fmt.Sprintf("cuda: %s: %s has shape %v, want %v", op, what, t.Shape, want))
	}
}

func needF32(op string, ts ...*kernels.Tensor) {
	for _, t := range ts {
		if t != nil && t.DType != kernels.F32 {
			panic(fmt.Sprintf("cuda: %s: %v must be fp32", op, t))
		}
	}
}

func (b *Backend) noCapture(op string) {
	if b.capturing {
		panic(fmt.Sprintf("cuda: %s cannot run inside a graph capture (it moves data to or from Go memory or waits for the device); do it before Launch or after", op))
	}
}

// Upload copies host floats into dst, rounded to dst's dtype.
func (b *Backend) Upload(dst *kernels.Tensor, src []float32) {
	defer b.enter("Upload", dst)()
	b.owns("Upload", dst)
	b.noCapture("Upload")
	if len(src) != dst.Len() {
		panic(fmt.Sprintf("cuda: Upload: %d values for %v", len(src), dst))
	}
	if len(src) == 0 {
		return
	}
	// A copy from pageable memory is staged before the call returns, so the
	// Go slice may change or be collected afterwards.
	if dst.DType == kernels.F32 {
		b.copyAsync("cuMemcpyHtoDAsync_v2", drv.cuMemcpyHtoDAsync, dst.Dev, uintptr(unsafe.Pointer(&src[0])), uintptr(dst.Bytes()))
		return
	}
	h := make([]uint16, len(src))
	kernels.EncodeHalf(h, src, dst.DType)
	b.copyAsync("cuMemcpyHtoDAsync_v2", drv.cuMemcpyHtoDAsync, dst.Dev, uintptr(unsafe.Pointer(&h[0])), uintptr(dst.Bytes()))
}

// Download waits for queued work and copies src into dst as float32.
func (b *Backend) Download(src *kernels.Tensor, dst []float32) {
	defer b.enter("Download", src)()
	b.owns("Download", src)
	b.noCapture("Download")
	if len(dst) != src.Len() {
		panic(fmt.Sprintf("cuda: Download: %d values for %v", len(dst), src))
	}
	if len(dst) == 0 {
		return
	}
	if src.DType == kernels.F32 {
		b.copyAsync("cuMemcpyDtoHAsync_v2", drv.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), src.Dev, uintptr(src.Bytes()))
		b.syncStream()
		return
	}
	h := make([]uint16, len(dst))
	b.copyAsync("cuMemcpyDtoHAsync_v2", drv.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&h[0])), src.Dev, uintptr(src.Bytes()))
	b.syncStream()
	kernels.DecodeHalf(dst, h, src.DType)
}

// Copy copies src into dst (same length), converting the dtype.
func (b *Backend) Copy(dst, src *kernels.Tensor) {
	defer b.enter("Copy", dst, src)()
	b.owns("Copy", dst, src)
	n := sameLen("Copy", dst, src)
	if n == 0 || dst.Dev == src.Dev && dst.DType == src.DType {
		return
	}
	if dst.DType == src.DType {
		b.copyAsync("cuMemcpyDtoDAsync_v2", drv.cuMemcpyDtoDAsync, dst.Dev, src.Dev, uintptr(dst.Bytes()))
		return
	}
	b.args.reset().ptr(dst.Dev).i32(int(dst.DType)).ptr(src.Dev).i32(int(src.DType)).i64(n)
	b.launch("convert", b.gridFor(n), 1, 1, 256)
}

// Fill sets every element of t to v (rounded to t's dtype).
func (b *Backend) Fill(t *kernels.Tensor, v float32) {
	defer b.enter("Fill", t)()
	b.owns("Fill", t)
	if n := t.Len(); n > 0 {
		b.args.reset().ptr(t.Dev).i32(int(t.DType)).i64(n).f32(v)
		b.launch("fill", b.gridFor(n), 1, 1, 256)
	}
}

// Scale multiplies t by s in place.
func (b *Backend) Scale(t *kernels.Tensor, s float32) {
	defer b.enter("Scale", t)()
	b.owns("Scale", t)
	if n := t.Len(); n > 0 {
		b.args.reset().ptr(t.Dev).i32(int(t.DType)).i64(n).f32(s)
		b.launch("scale", b.gridFor(n), 1, 1, 256)
	}
}

func (b *Backend) ReLUForward(y, x *kernels.Tensor) {
	defer b.enter("ReLUForward", y, x)()
	b.owns("ReLUForward", y, x)
	if n := sameLen("ReLUForward", y, x); n > 0 {
		b.args.reset().ptr(y.Dev).i32(int(y.DType)).ptr(x.Dev).i32(int(x.DType)).i64(n)
		b.launch("relu_fwd", b.gridFor(n), 1, 1, 256)
	}
}

func (b *Backend) ReLUBackward(dx, dy, y *kernels.Tensor) {
	defer b.enter("ReLUBackward", dx, dy, y)()
	b.owns("ReLUBackward", dx, dy, y)
	if n := sameLen("ReLUBackward", dx, dy, y); n > 0 {
		b.args.reset().ptr(dx.Dev).i32(int(dx.DType)).ptr(dy.Dev).i32(int(dy.DType)).ptr(y.Dev).i32(int(y.DType)).i64(n)
		b.launch("relu_bwd", b.gridFor(n), 1, 1, 256)
	}
}

func (b *Backend) Add(y, a, c *kernels.Tensor) {
	defer b.enter("Add", y, a, c)()
	b.owns("Add", y, a, c)
	if n := sameLen("Add", y, a, c); n > 0 {
		b.args.reset().ptr(y.Dev).i32(int(y.DType)).ptr(a.Dev).i32(int(a.DType)).ptr(c.Dev).i32(int(c.DType)).i64(n)
		b.launch("add", b.gridFor(n), 1, 1, 256)
	}
}
