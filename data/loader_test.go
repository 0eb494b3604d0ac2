package data

import (
	"fmt"
	"slices"
	"testing"
)

// sample is one loaded sample: its data set index and its floats.
type sample struct {
	idx   int
	label float32
	x     []float32
}

// loadBatch runs Batch and returns its samples, keyed by data set index.
func loadBatch(t *testing.T, l *Loader, epoch, step int) map[int]sample {
	t.Helper()
	il := l.Dataset().ImageLen()
	x := make([]float32, l.BatchSize()*il)
	y := make([]float32, l.BatchSize())
	n := l.Batch(epoch, step, x, y)
	idx := l.Indices(epoch, step)
	if n != len(idx) {
		t.Fatalf("Batch returned %d samples, Indices %d", n, len(idx))
	}
	out := map[int]sample{}
	for k, i := range idx {
		out[i] = sample{i, y[k], x[k*il : (k+1)*il]}
	}
	return out
}

// TestLoaderWorldUnion: the union of the ranks' batch s is world=1's batch
// s at W times the batch size, every sample augmented identically. That is
// what makes a run's numbers independent of the number of GPUs.
func TestLoaderWorldUnion(t *testing.T) {
	train, _ := Synthetic(1050, 0, 2)
	const seed = 77
	one := NewLoader(train, TrainOptions(100, seed, 0, 1))
	for _, world := range []int{2, 4} {
		ranks := make([]*Loader, world)
		for r := range ranks {
			ranks[r] = NewLoader(train, TrainOptions(100/world, seed, r, world))
		}
		if ranks[0].Steps(0) != one.Steps(0) {
			t.Fatalf("world=%d: %d steps, world=1 has %d", world, ranks[0].Steps(0), one.Steps(0))
		}
		for _, epoch := range []int{0, 3} {
			for s := 0; s < one.Steps(epoch); s++ {
				want := loadBatch(t, one, epoch, s)
				got := map[int]sample{}
				for _, l := range ranks {
					for i, smp := range loadBatch(t, l, epoch, s) {
						if _, dup := got[i]; dup {
							t.Fatalf("world=%d epoch %d step %d: sample %d on two ranks", world, epoch, s, i)
						}
						got[i] = smp
					}
				}
				compareBatches(t, fmt.Sprintf("world=%d epoch %d step %d", world, epoch, s), got, want)
			}
		}
	}
}

func compareBatches(t *testing.T, what string, got, want map[int]sample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d samples, want %d", what, len(got), len(want))
	}
	for i, w := range want {
		g, ok := got[i]
		if !ok {
			t.Fatalf("%s: sample %d missing", what, i)
		}
		if g.label != w.label || !slices.Equal(g.x, w.x) {
			t.Fatalf("%s: sample %d loaded differently", what, i)
		}
	}
}

// TestLoaderAugmentsWithParams checks Batch's floats against Augment with
// AugmentParams(seed, epoch, index) and the labels against the data set.
func TestLoaderAugmentsWithParams(t *testing.T) {
	train, _ := Synthetic(64, 0, 1)
	l := NewLoader(train, TrainOptions(16, 5, 1, 2))
	want := make([]float32, train.ImageLen())
	for i, smp := range loadBatch(t, l, 2, 1) {
		dy, dx, flip := AugmentParams(5, 2, i)
		Augment(want, train.Image(i), 3, dy, dx, flip)
		if !slices.Equal(smp.x, want) || smp.label != float32(train.Labels[i]) {
			t.Fatalf("sample %d: floats or label differ from Augment(AugmentParams)", i)
		}
	}
}

func TestLoaderTestSetInOrder(t *testing.T) {
	_, test := Synthetic(0, 250, 4)
	l := NewLoader(test, LoaderOptions{Batch: 100})
	if l.Steps(0) != 3 {
		t.Fatalf("%d steps for 250 samples at batch 100, want 3", l.Steps(0))
	}
	x := make([]float32, 100*test.ImageLen())
	y := make([]float32, 100)
	want := make([]float32, test.ImageLen())
	next := 0
	for epoch := 0; epoch < 2; epoch++ {
		next = 0
		for s := 0; s < l.Steps(epoch); s++ {
			n := l.Batch(epoch, s, x, y)
			for k := 0; k < n; k++ {
				ToFloat(want, test.Image(next))
				if y[k] != float32(test.Labels[next]) || !slices.Equal(x[k*len(want):(k+1)*len(want)], want) {
					t.Fatalf("epoch %d step %d item %d is not sample %d", epoch, s, k, next)
				}
				next++
			}
		}
	}
	if next != 250 {
		t.Fatalf("loaded %d samples, want all 250", next)
	}
}

func TestLoaderSteps(t *testing.T) {
	ds, _ := Synthetic(1050, 0, 1)
	cases := []struct {
		batch, world int
		dropLast     bool
		steps, last  int
	}{
		{100, 1, true, 10, 100},
		{100, 1, false, 11, 50},
		{50, 2, true, 10, 50},
		{50, 2, false, 11, 25},
		{100, 4, false, 3, 62}, // 1050/4 = 262 per rank
	}
	for _, c := range cases {
		l := NewLoader(ds, LoaderOptions{Batch: c.batch, Shuffle: true, DropLast: c.dropLast, Seed: 1, Rank: c.world - 1, World: c.world})
		if l.Steps(0) != c.steps {
			t.Fatalf("%+v: %d steps", c, l.Steps(0))
		}
		if got := len(l.Indices(0, c.steps-1)); got != c.last {
			t.Fatalf("%+v: last batch has %d samples", c, got)
		}
	}
}

// TestLoaderResume: a loader that starts at epoch 5 gives the batches of
// one that went through epochs 0..4 first.
func TestLoaderResume(t *testing.T) {
	ds, _ := Synthetic(300, 0, 1)
	a := NewLoader(ds, TrainOptions(30, 8, 0, 1))
	for e := 0; e < 5; e++ {
		for s := 0; s < a.Steps(e); s++ {
			loadBatch(t, a, e, s)
		}
	}
	b := NewLoader(ds, TrainOptions(30, 8, 0, 1))
	for s := 0; s < a.Steps(5); s++ {
		compareBatches(t, fmt.Sprintf("epoch 5 step %d", s), loadBatch(t, b, 5, s), loadBatch(t, a, 5, s))
	}
}

func TestBatchDoesNotAllocate(t *testing.T) {
	ds, _ := Synthetic(200, 0, 1)
	l := NewLoader(ds, TrainOptions(50, 1, 1, 2))
	x := make([]float32, 50*ds.ImageLen())
	y := make([]float32, 50)
	epoch := 0
	allocs := testing.AllocsPerRun(20, func() {
		epoch++ // a new epoch each call: the permutation is recomputed in place
		l.Batch(epoch, 1, x, y)
	})
	if allocs != 0 {
		t.Fatalf("Batch allocated %v times per call, want 0", allocs)
	}
}
