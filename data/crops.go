package data

import "fmt"

// Crop is the augmentation of one sample of a batch: data set Index, crop
// offsets DY, DX (0..2*Pad) into the zero-padded image and the horizontal
// Flip. Without augmentation it is (Index, Pad, Pad, false): the image as is.
type Crop struct {
	Index, DY, DX int
	Flip          bool
}

// crop is the decision Batch applies to sample i of epoch.
func (l *Loader) crop(epoch, i int) Crop {
	if !l.augment {
		return Crop{Index: i, DY: Pad, DX: Pad}
	}
	dy, dx, flip := AugmentParams(l.seed, epoch, i)
	return Crop{Index: i, DY: dy, DX: dx, Flip: flip}
}

// Crops fills crops and labels with batch step of epoch as Batch would
// build it (without building it: a backend that holds the data set
// assembles the images, see kernels.Batcher), and returns the count.
func (l *Loader) Crops(epoch, step int, crops []Crop, labels []float32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	idx := l.indicesLocked(epoch, step)
	if len(crops) < len(idx) || len(labels) < len(idx) {
		panic(fmt.Sprintf("data: batch of %d needs %d crops and labels, got %d and %d",
			len(idx), len(idx), len(crops), len(labels)))
	}
	for k, i := range idx {
		crops[k] = l.crop(epoch, i)
		labels[k] = float32(l.ds.Labels[i])
	}
	return len(idx)
}
