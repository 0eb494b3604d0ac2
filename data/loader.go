package data

import (
	"fmt"
	"sync"
)

// Loader cuts one rank's share of a data set into batches of float32
// images, like torch's DataLoader over a DistributedSampler. Batch does not
// allocate: the epoch's index list is computed into a buffer that is reused
// by every later epoch. A Loader may be shared by goroutines, but asking for
// two epochs in turn recomputes the permutation each time.
type Loader struct {
	ds       *Dataset
	batch    int
	shuffle  bool
	dropLast bool
	augment  bool
	seed     uint64
	rank     int
	world    int

	mu       sync.Mutex
	buf      []int // len ds.N; holds the permutation then the rank's share
	idx      []int // the rank's share of epoch idxEpoch
	idxEpoch int
}

// NewLoader returns a loader of rank's share of ds. With shuffle the order
// changes every epoch (seeded); with augment every sample is padded,
// cropped and flipped with AugmentParams(seed, epoch, index); with dropLast
// a last partial batch is skipped.
func NewLoader(ds *Dataset, batch int, shuffle, dropLast, augment bool, seed uint64, rank, world int) *Loader {
	if batch < 1 {
		panic(fmt.Sprintf("data: batch size %d, expected >= 1", batch))
	}
	if world < 1 || rank < 0 || rank >= world {
		panic(fmt.Sprintf("data: rank %d of world %d: expected 0 <= rank < world", rank, world))
	}
	return &Loader{ds: ds, batch: batch, shuffle: shuffle, dropLast: dropLast, augment: augment,
		seed: seed, rank: rank, world: world, buf: make([]int, ds.N), idxEpoch: -1}
}

// Dataset is the loader's data set.
func (l *Loader) Dataset() *Dataset { return l.ds }

// BatchSize is the (per-rank) batch size.
func (l *Loader) BatchSize() int { return l.batch }

// Samples is the number of samples this rank sees per epoch (n/world).
func (l *Loader) Samples() int { return l.ds.N / l.world }

// Steps is the number of batches of an epoch.
func (l *Loader) Steps(epoch int) int {
	m := l.Samples()
	if l.dropLast {
		return m / l.batch
	}
	return (m + l.batch - 1) / l.batch
}

// Indices returns the data set indices of batch step of epoch. The slice
// is a view that the next call for another epoch overwrites.
func (l *Loader) Indices(epoch, step int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.indicesLocked(epoch, step)
}

func (l *Loader) indicesLocked(epoch, step int) []int {
	if step < 0 || step >= l.Steps(epoch) {
		panic(fmt.Sprintf("data: step %d of epoch %d, expected 0 <= step < %d", step, epoch, l.Steps(epoch)))
	}
	// Without shuffle the order is the same every epoch: compute it once.
	if l.idx == nil || (l.shuffle && l.idxEpoch != epoch) {
		l.idx = epochIndicesInto(l.buf, l.seed, epoch, l.shuffle, l.rank, l.world)
		l.idxEpoch = epoch
	}
	lo := step * l.batch
	return l.idx[lo:min(lo+l.batch, len(l.idx))]
}

// Batch fills x with batch step of epoch (count*C*32*32 floats in [0,1],
// NCHW) and labels with the class indices as float32, and returns count:
// the batch size, or less for a last partial batch when !dropLast.
func (l *Loader) Batch(epoch, step int, x []float32, labels []float32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	idx := l.indicesLocked(epoch, step)
	il := l.ds.ImageLen()
	if len(x) < len(idx)*il || len(labels) < len(idx) {
		panic(fmt.Sprintf("data: batch of %d needs %d floats and %d labels, got %d and %d",
			len(idx), len(idx)*il, len(idx), len(x), len(labels)))
	}
	for k, i := range idx {
		dst := x[k*il : (k+1)*il]
		if l.augment {
			c := l.crop(epoch, i)
			Augment(dst, l.ds.Image(i), l.ds.C, c.DY, c.DX, c.Flip)
		} else {
			ToFloat(dst, l.ds.Image(i))
		}
		labels[k] = float32(l.ds.Labels[i])
	}
	return len(idx)
}
