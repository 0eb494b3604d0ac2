package cpu

import (
	"fmt"

	"resnetlab/kernels"
)

// New returns a zero-filled tensor and accounts its device-equivalent size
// (elements * dt.Size()) under cat.
func (b *Backend) New(cat kernels.Category, dt kernels.DType, shape ...int) *kernels.Tensor {
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("cpu: New: negative dimension in shape %v", shape))
		}
	}
	if dt > kernels.BF16 {
		panic(fmt.Sprintf("cpu: New: unknown dtype %v", dt))
	}
	t := &kernels.Tensor{
		Shape: append([]int(nil), shape...),
		DType: dt,
		Cat:   cat,
		Host:  make([]float32, kernels.NumElems(shape)),
		Owner: b,
	}
	b.account(cat, t.Bytes())
	return t
}

// Adopt wraps host, memory the caller allocated (for example a device
// backend's pinned memory) and keeps alive until Free, as a tensor of
// shape and accounts it like New. Its values must already be rounded to
// dt; host must hold exactly the shape's element count.
func (b *Backend) Adopt(cat kernels.Category, dt kernels.DType, host []float32, shape ...int) *kernels.Tensor {
	if n := kernels.NumElems(shape); n != len(host) || dt > kernels.BF16 {
		panic(fmt.Sprintf("cpu: Adopt: %d values of %v for shape %v", len(host), dt, shape))
	}
	t := &kernels.Tensor{Shape: append([]int(nil), shape...), DType: dt, Cat: cat, Host: host, Owner: b}
	b.account(cat, t.Bytes())
	return t
}

// Free releases a tensor; using it afterwards panics.
func (b *Backend) Free(t *kernels.Tensor) {
	if t == nil {
		return
	}
	b.check(t, "Free")
	b.account(t.Cat, -t.Bytes())
	t.Host = nil
}

// Upload copies host values into dst, rounded to dst.DType.
func (b *Backend) Upload(dst *kernels.Tensor, src []float32) {
	b.check(dst, "Upload dst")
	if len(src) != dst.Len() {
		panic(fmt.Sprintf("cpu: Upload: %d values for %v (want %d)", len(src), dst, dst.Len()))
	}
	copy(dst.Host, src)
	b.round(dst)
}

// Download copies a tensor's values into dst.
func (b *Backend) Download(src *kernels.Tensor, dst []float32) {
	b.check(src, "Download src")
	if len(dst) != src.Len() {
		panic(fmt.Sprintf("cpu: Download: buffer of %d for %v (want %d)", len(dst), src, src.Len()))
	}
	copy(dst, src.Host)
}

// Copy copies src into dst (same length), converting the dtype.
func (b *Backend) Copy(dst, src *kernels.Tensor) {
	b.check(dst, "Copy dst")
	b.check(src, "Copy src")
	sameLen("Copy", dst, src)
	// On every core, rounding each piece as it is copied: Gemini rounds a
	// whole chunk's fp32 master weights into its host fp16 payload this
	// way after the optimizer step, on the step's critical path.
	d, s, dt := dst.Host, src.Host, dst.DType
	b.parallel(len(d), grain, func(lo, hi int) { copyRound(dt, d[lo:hi], s[lo:hi]) })
}

// copyRound copies src into dst (same length) rounded to dt, with the
// hardware conversion where the CPU has one.
func copyRound(dt kernels.DType, dst, src []float32) {
	n := 0
	if dt == kernels.F16 {
		n = roundF16Vec(dst, src)
	}
	copy(dst[n:], src[n:])
	roundSlice(dt, dst[n:])
}

// Fill sets every element to v (rounded to t.DType).
func (b *Backend) Fill(t *kernels.Tensor, v float32) {
	b.check(t, "Fill")
	v = roundTo(t.DType, v)
	b.parallel(t.Len(), grain, func(lo, hi int) {
		h := t.Host[lo:hi]
		for i := range h {
			h[i] = v
		}
	})
}

// check panics unless t is a live tensor of this backend.
func (b *Backend) check(t *kernels.Tensor, what string) {
	if t == nil {
		panic(fmt.Sprintf("cpu: %s: nil tensor", what))
	}
	if t.Host == nil {
		panic(fmt.Sprintf("cpu: %s: %v has no host storage (freed, or owned by another backend)", what, t))
	}
	if len(t.Host) != t.Len() {
		panic(fmt.Sprintf("cpu: %s: %v holds %d elements (want %d)", what, t, len(t.Host), t.Len()))
	}
}

func sameLen(op string, a, b *kernels.Tensor) {
	if a.Len() != b.Len() {
		panic(fmt.Sprintf("cpu: %s: %v and %v differ in length", op, a, b))
	}
}

// wantShape panics unless t has exactly the given shape.
func wantShape(op, name string, t *kernels.Tensor, shape ...int) {
	ok := len(t.Shape) == len(shape)
	for i := 0; ok && i < len(shape); i++ {
		ok = t.Shape[i] == shape[i]
	}
	if !ok {
		panic(fmt.Sprintf("cpu: %s: %s has shape %v (want %v)", op, name, t.Shape, shape))
	}
}

// dims4 returns the four dimensions of an NCHW tensor.
func dims4(op, name string, t *kernels.Tensor) (n, c, h, w int) {
	if len(t.Shape) != 4 {
		panic(fmt.Sprintf("cpu: %s: %s has shape %v (want 4-D NCHW)", op, name, t.Shape))
	}
	return t.Shape[0], t.Shape[1], t.Shape[2], t.Shape[3]
}

// round rounds a freshly written tensor to its dtype (no-op for F32).
func (b *Backend) round(t *kernels.Tensor) {
	if t.DType == kernels.F32 {
		return
	}
	h, dt := t.Host, t.DType
	b.parallel(len(h), 1<<14, func(lo, hi int) {
		roundSlice(dt, h[lo:hi])
	})
}

func roundSlice(dt kernels.DType, s []float32) {
	switch dt {
	case kernels.F16:
		n := roundF16Vec(s, s)
		for i, v := range s[n:] {
			s[n+i] = RoundF16(v)
		}
	case kernels.BF16:
		for i, v := range s {
			s[i] = RoundBF16(v)
		}
	}
}

func roundTo(dt kernels.DType, v float32) float32 {
	switch dt {
	case kernels.F16:
		return RoundF16(v)
	case kernels.BF16:
		return RoundBF16(v)
	}
	return v
}

// The CPU backend's AsyncMover is synchronous: host memory is its device
// memory, so every move is complete when the call returns.
var _ kernels.AsyncMover = (*Backend)(nil)

func (b *Backend) UploadAsync(dst *kernels.Tensor, src []float32) kernels.Move {
	return kernels.SyncMover{B: b}.UploadAsync(dst, src)
}

func (b *Backend) DownloadAsync(src *kernels.Tensor, dst []float32) kernels.Move {
	return kernels.SyncMover{B: b}.DownloadAsync(src, dst)
}

func (b *Backend) Await(kernels.Move)  {}
func (b *Backend) Finish(kernels.Move) {}
