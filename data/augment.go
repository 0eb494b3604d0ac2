package data

// Pad is the zero padding of the reference train transform; crop offsets
// range over 0..2*Pad inclusive.
const Pad = 4

// toUnit maps a byte to float32(b)/255, the exact value of torchvision's ToTensor.
var toUnit = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i) / 255
	}
	return
}()

// AugmentParams returns the crop offsets (each uniform in 0..8, into the
// 40x40 zero-padded image) and the horizontal flip (p=0.5) of sample idx in
// epoch. They depend on nothing else, so world size, batch layout and resume
// point cannot change them.
func AugmentParams(seed uint64, epoch, idx int) (dy, dx int, flip bool) {
	h := hash(seed, domainAug, uint64(epoch), uint64(idx))
	const span = 2*Pad + 1
	dy = int(((h & 0xffffffff) * span) >> 32)
	dx = int((((h >> 32) & 0x7fffffff) * span) >> 31)
	return dy, dx, h>>63 == 1
}

// Augment writes img (c channels of 32x32 bytes, channel-major) into dst as
// [0,1] floats after Pad(4) with zeros, a 32x32 crop at (dy,dx) of the padded
// image, and a horizontal flip of the crop when flip is set.
//
// torchvision's recipe flips before cropping; flip-then-crop at dx equals
// crop-then-flip at 8-dx, and dx is uniform on 0..8, so the distribution of
// augmented images is the same.
func Augment(dst []float32, img []uint8, c int, dy, dx int, flip bool) {
	_ = dst[c*Plane-1]
	_ = img[c*Plane-1]
	AugmentImage(dst, img, c, Side, Side, dy-Pad, dx-Pad, flip)
}

// AugmentImage is Augment for any image size, with the crop given as the
// offset (oy, ox) of its top-left pixel in the unpadded image: out[ch][y][x]
// = img[ch][y+oy][x'+ox] / 255 with x' = x, or w-1-x when flipped, and 0
// where that pixel lies outside the image. The CPU backend's AugmentBatch
// uses it too, so batches built there equal the host pipeline's.
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
			out[x] = toUnit[row[x+sx0]]
		}
		clear(out[hi:])
		return
	}
	clear(out[w-lo:])
	for x := lo; x < hi; x++ {
		out[w-1-x] = toUnit[row[x+sx0]]
	}
	clear(out[:w-hi])
}

// ToFloat writes img as [0,1] floats into dst (the test transform).
func ToFloat(dst []float32, img []uint8) {
	dst = dst[:len(img)]
	for i, b := range img {
		dst[i] = toUnit[b]
	}
}
