package cpu

import (
	"fmt"

	"resnetlab/kernels"
)

var _ kernels.Batcher = (*Backend)(nil)

// UploadImages keeps a reference to images (the CPU needs no copy) and
// accounts its size as a device would hold it.
func (b *Backend) UploadImages(images []uint8, n, c, h, w int) (*kernels.Images, error) {
	if err := kernels.CheckImages(images, n, c, h, w); err != nil {
		return nil, err
	}
	s := &kernels.Images{N: n, C: c, H: h, W: w, Host: images[:len(images):len(images)], Owner: b}
	b.account(kernels.CatData, s.Bytes())
	return s, nil
}

// FreeImages drops the reference; using s afterwards panics.
func (b *Backend) FreeImages(s *kernels.Images) {
	if s == nil || s.Host == nil {
		return
	}
	b.checkImages(s, "FreeImages")
	b.account(kernels.CatData, -s.Bytes())
	s.Host = nil
}

// AugmentBatch builds each image of x from its crop (see kernels.Crop),
// samples in parallel.
func (b *Backend) AugmentBatch(x *kernels.Tensor, src *kernels.Images, crops []kernels.Crop, pad int) {
	b.check(x, "AugmentBatch x")
	kernels.CheckAugment(x, src, crops, pad)
	b.checkImages(src, "AugmentBatch")
	il := src.ImageLen()
	b.parallel(len(crops), 8, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			c := crops[k]
			out := x.Host[k*il : (k+1)*il]
			kernels.AugmentImage(out, src.Host[c.Index*il:(c.Index+1)*il], src.C, src.H, src.W, c.DY-pad, c.DX-pad, c.Flip)
			roundSlice(x.DType, out)
		}
	})
}

func (b *Backend) checkImages(s *kernels.Images, what string) {
	if s.Owner != kernels.Backend(b) || s.Host == nil {
		panic(fmt.Sprintf("cpu: %s: %v is freed or belongs to another backend", what, s))
	}
}
