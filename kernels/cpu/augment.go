package cpu

import (
	"fmt"

	"resnetlab/kernels"
)

var _ kernels.Batcher = (*Backend)(nil)

// unit maps a byte to float32(b)/255, the value ToTensor (and package
// data) gives it.
var unit = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i) / 255
	}
	return
}()

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
			cropImage(out, src.Host[c.Index*il:(c.Index+1)*il], src.C, src.H, src.W, c.DY-pad, c.DX-pad, c.Flip)
			roundSlice(x.DType, out)
		}
	})
}

func (b *Backend) checkImages(s *kernels.Images, what string) {
	if s.Owner != kernels.Backend(b) || s.Host == nil {
		panic(fmt.Sprintf("cpu: %s: %v is freed or belongs to another backend", what, s))
	}
}

// cropImage writes out[ch][y][x] = img[ch][y+oy][x'+ox] / 255 with x' = x,
// or w-1-x when flipped, and 0 where that pixel lies outside the image.
func cropImage(out []float32, img []uint8, c, h, w, oy, ox int, flip bool) {
	lo, hi := max(0, -ox), min(w, w-ox) // source-aligned x range with a pixel
	for ch := 0; ch < c; ch++ {
		for y := 0; y < h; y++ {
			row := out[(ch*h+y)*w : (ch*h+y+1)*w]
			sy := y + oy
			if sy < 0 || sy >= h || lo >= hi {
				clear(row)
				continue
			}
			src := img[(ch*h+sy)*w : (ch*h+sy+1)*w]
			if !flip {
				clear(row[:lo])
				for x := lo; x < hi; x++ {
					row[x] = unit[src[x+ox]]
				}
				clear(row[hi:])
				continue
			}
			clear(row[w-lo:])
			for x := lo; x < hi; x++ {
				row[w-1-x] = unit[src[x+ox]]
			}
			clear(row[:w-hi])
		}
	}
}
