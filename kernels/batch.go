package kernels

import "fmt"

// Images is a uint8 image data set held in a backend's memory, for
// Batcher.AugmentBatch: N images of C x H x W bytes each, channel-major,
// one after another. The CPU backend keeps the bytes in Host, a device
// backend a device pointer in Dev.
type Images struct {
	N, C, H, W int
	Host       []uint8
	Dev        uintptr
	Owner      Backend
}

// ImageLen is the number of bytes of one image.
func (s *Images) ImageLen() int { return s.C * s.H * s.W }

// Bytes is the storage size.
func (s *Images) Bytes() int64 { return int64(s.N) * int64(s.ImageLen()) }

func (s *Images) String() string { return fmt.Sprintf("Images[%d,%d,%d,%d]", s.N, s.C, s.H, s.W) }

// Crop is how one image of a batch is made from an Images set: image Index,
// zero-padded by pad on every side, cropped back to H x W at row DY and
// column DX of the padded image (each in 0..2*pad), then flipped
// horizontally when Flip is set. (pad, pad, false) is the image itself.
type Crop struct {
	Index  int
	DY, DX int
	Flip   bool
}

// Batcher is implemented by backends that assemble input batches from a
// data set held in their own memory, so a training step uploads a few
// numbers per image instead of the image. It is optional: callers
// type-assert it and fall back to building batches on the host.
//
// The values are exactly those of the host pipeline (package data): byte b
// becomes float32(b)/255 (correctly rounded), then x's dtype rounding
// (nearest even), so both paths give the same batches bit for bit.
type Batcher interface {
	// UploadImages copies n images of c x h x w bytes into the backend's
	// memory, accounted under CatData until FreeImages. An error means this
	// backend cannot build batches now (e.g. its loaded kernels lack the op);
	// the caller should use host batches. The CPU backend keeps a reference
	// to images instead of a copy: it must not change while the set lives.
	UploadImages(images []uint8, n, c, h, w int) (*Images, error)
	FreeImages(s *Images)
	// AugmentBatch writes batch image k of x ([len(crops), C, H, W], any
	// dtype) from crops[k] of src with padding pad (see Crop).
	AugmentBatch(x *Tensor, src *Images, crops []Crop, pad int)
}

// CheckImages validates UploadImages' arguments (shared by the backends).
func CheckImages(images []uint8, n, c, h, w int) error {
	if n < 0 || c < 1 || h < 1 || w < 1 {
		return fmt.Errorf("kernels: UploadImages: shape [%d,%d,%d,%d], want n >= 0 and c, h, w >= 1", n, c, h, w)
	}
	if want := int64(n) * int64(c) * int64(h) * int64(w); int64(len(images)) != want {
		return fmt.Errorf("kernels: UploadImages: %d bytes for [%d,%d,%d,%d], want %d", len(images), n, c, h, w, want)
	}
	return nil
}

// CheckAugment panics unless AugmentBatch's operands agree: x is
// [len(crops), C, H, W] of src, every index is an image of src and every
// offset lies in 0..2*pad. Backends call it before touching memory.
func CheckAugment(x *Tensor, src *Images, crops []Crop, pad int) {
	if src == nil {
		panic("kernels: AugmentBatch: nil image set")
	}
	want := []int{len(crops), src.C, src.H, src.W}
	ok := len(x.Shape) == 4
	for i := 0; ok && i < 4; i++ {
		ok = x.Shape[i] == want[i]
	}
	if !ok {
		panic(fmt.Sprintf("kernels: AugmentBatch: output %v, want shape %v for %d crops of %v", x, want, len(crops), src))
	}
	if pad < 0 {
		panic(fmt.Sprintf("kernels: AugmentBatch: pad %d, want >= 0", pad))
	}
	for k, c := range crops {
		if c.Index < 0 || c.Index >= src.N || c.DY < 0 || c.DY > 2*pad || c.DX < 0 || c.DX > 2*pad {
			panic(fmt.Sprintf("kernels: AugmentBatch: crop %d %+v out of range (images 0..%d, offsets 0..%d)",
				k, c, src.N-1, 2*pad))
		}
	}
}
