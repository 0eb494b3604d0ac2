package data

import "resnetlab/kernels"

// Pad is the zero padding of the reference train transform; crop offsets
// range over 0..2*Pad inclusive.
const Pad = 4

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
	kernels.AugmentImage(dst, img, c, Side, Side, dy-Pad, dx-Pad, flip)
}

// ToFloat writes img as [0,1] floats into dst (the test transform).
func ToFloat(dst []float32, img []uint8) {
	dst = dst[:len(img)]
	for i, b := range img {
		dst[i] = kernels.ByteToUnit[b]
	}
}
