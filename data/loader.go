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

// LoaderOptions configures a Loader. The zero value is the test-set
// loader of a single process: in order, every sample, no augmentation.
type LoaderOptions struct {
	Batch    int    // per-rank batch size, >= 1
	Shuffle  bool   // a new order every epoch, from Seed
	DropLast bool   // skip a last partial batch
	Augment  bool   // pad, crop and flip every sample with AugmentParams(Seed, epoch, index)
	Seed     uint64 // the order's and the augmentation's seed
	Rank     int    // this rank, in [0, World)
	World    int    // ranks sharing the data set (0 means 1)
}

// TrainOptions are the training loader's options of the recipe:
// shuffled, augmented, the last partial batch dropped.
func TrainOptions(batch int, seed uint64, rank, world int) LoaderOptions {
	return LoaderOptions{Batch: batch, Shuffle: true, DropLast: true, Augment: true, Seed: seed, Rank: rank, World: world}
}

// NewLoader returns a loader of the rank's share of ds.
func NewLoader(ds *Dataset, o LoaderOptions) *Loader {
	if o.World == 0 {
		o.World = 1
	}
	if o.Batch < 1 {
		panic(fmt.Sprintf("data: batch size %d, expected >= 1", o.Batch))
	}
	if o.World < 1 || o.Rank < 0 || o.Rank >= o.World {
		panic(fmt.Sprintf("data: rank %d of world %d: expected 0 <= rank < world", o.Rank, o.World))
	}
	return &Loader{ds: ds, batch: o.Batch, shuffle: o.Shuffle, dropLast: o.DropLast, augment: o.Augment,
		seed: o.Seed, rank: o.Rank, world: o.World, buf: make([]int, ds.N), idxEpoch: -1}
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
