package kernels

// ByteToUnit maps a byte to float32(b)/255, the exact value of
// torchvision's ToTensor.
var ByteToUnit = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i) / 255
	}
	return
}()

// AugmentImage is Augment for any image size, with the crop given as the
// offset (oy, ox) of its top-left pixel in the unpadded image: out[ch][y][x]
// = img[ch][y+oy][x'+ox] / 255 with x' = x, or w-1-x when flipped, and 0
// where that pixel lies outside the image. It is the CPU reference of AugmentBatch and
// the host data pipeline's transform (data.Augment), so batches built on a
// backend equal the host pipeline's.
func AugmentImage(dst []float32, img []uint8, c, h, w, oy, ox int, flip bool) {
	for ch := 0; ch < c; ch++ {
		src := img[ch*h*w : (ch+1)*h*w]
		out := dst[ch*h*w : (ch+1)*h*w]
		for y := 0; y < h; y++ {
			augmentRow(out[y*w:(y+1)*w], src, w, y+oy, ox, flip)
		}
	}
}

// augmentRow fills one output row of width w from source row sy shifted by
// sx0: out[x] = src[sy][x+sx0] (or out[w-1-x] when flipped), zero outside
// the image.
func augmentRow(out []float32, src []uint8, w, sy, sx0 int, flip bool) {
	if sy < 0 || sy >= len(src)/w {
		clear(out)
		return
	}
	row := src[sy*w : (sy+1)*w]
	lo, hi := max(0, -sx0), min(w, w-sx0) // x range with a source pixel
	if lo >= hi {
		clear(out)
		return
	}
	if !flip {
		clear(out[:lo])
		for x := lo; x < hi; x++ {
			out[x] = ByteToUnit[row[x+sx0]]
		}
		clear(out[hi:])
		return
	}
	clear(out[w-lo:])
	for x := lo; x < hi; x++ {
		out[w-1-x] = ByteToUnit[row[x+sx0]]
	}
	clear(out[:w-hi])
}
