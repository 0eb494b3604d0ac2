package data

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Synthetic set design. Each class is a fixed template: a few soft blobs
// (Gaussians) with seeded positions, sizes and colours. A sample is its
// class template shifted by a few pixels, hue-rotated by a random angle
// about the grey axis (which keeps each blob's luminance and the hue
// differences between blobs, but not their absolute colours), scaled in
// brightness, over a random background colour, with one unrelated
// distractor blob and per-pixel noise. Shift and hue are what a linear
// model on raw pixels handles badly and a small CNN handles well.
type synParams struct {
	shift     int     // template shift range: -shift..shift pixels
	blobs     int     // blobs per class template
	blobAmp   float64 // blob colour amplitude (grey levels per unit colour)
	hue       float64 // hue rotation range: +-hue radians
	noise     int32   // per-pixel noise amplitude (triangular, +-noise)
	distract  int     // distractor peak amplitude (grey levels)
	brightMin int     // template gain range, of 256
	brightMax int
}

// synDefault was tuned on a GPU with torch (50k train / 10k test, Adam 1e-3,
// batch 100): a linear softmax on raw pixels plateaus near 58% test accuracy
// after 10 epochs, a 3-conv LeNet-style CNN with flip+crop augmentation
// reaches 77/87/93% after epochs 1/2/3, and ResNet-18 97% after 2 epochs.
var synDefault = synParams{shift: 8, blobs: 3, blobAmp: 140, hue: math.Pi, noise: 20,
	distract: 90, brightMin: 150, brightMax: 330}

const (
	synMaxShift   = 8
	synCanvas     = Side + 2*synMaxShift
	synSpriteHalf = 7 // distractor sprite is (2*half+1)^2
)

// SyntheticClasses names the synthetic classes.
var SyntheticClasses = func() []string {
	s := make([]string, 10)
	for i := range s {
		s[i] = fmt.Sprintf("pattern-%d", i)
	}
	return s
}()

// synTemplate is one class's colour planes as fixed-point intensities
// (1.0 = 256) on a canvas synMaxShift pixels larger than the image on every side.
type synTemplate [3][synCanvas * synCanvas]int16

// Synthetic returns a seeded, learnable 10-class 3x32x32 train and test set
// of the given sizes. The same seed gives the same bytes; train and test
// share the class templates but no samples. Classes are balanced (counts
// differ by at most one).
func Synthetic(train, test int, seed uint64) (trainSet, testSet *Dataset) {
	g := newSynGen(synDefault, seed)
	return g.set(train, 0), g.set(test, 1)
}

type synGen struct {
	p      synParams
	seed   uint64
	tpl    [10]synTemplate
	sprite [(2*synSpriteHalf + 1) * (2*synSpriteHalf + 1)]int16
	noise  [256]int32
}

func newSynGen(p synParams, seed uint64) *synGen {
	g := &synGen{p: p, seed: seed, noise: triangularTable(p.noise)}
	r := rng{hash(seed, domainSyn, 0x746d706c)}
	for k := range g.tpl {
		for b := 0; b < p.blobs; b++ {
			cy, cx := 8+r.float()*16, 8+r.float()*16
			sigma := 2.5 + r.float()*3.5
			for c := 0; c < 3; c++ {
				amp := (r.float()*2 - 1) * p.blobAmp // bright or dark per channel
				addBlob(g.tpl[k][c][:], cy+synMaxShift, cx+synMaxShift, sigma, amp)
			}
		}
	}
	const w = 2*synSpriteHalf + 1
	for y := 0; y < w; y++ {
		for x := 0; x < w; x++ {
			d2 := float64((y-synSpriteHalf)*(y-synSpriteHalf) + (x-synSpriteHalf)*(x-synSpriteHalf))
			g.sprite[y*w+x] = int16(256 * math.Exp(-d2/18)) // sigma 3
		}
	}
	return g
}

// addBlob adds amp*exp(-r^2/(2 sigma^2)) to a canvas plane (fixed point), saturating.
func addBlob(plane []int16, cy, cx, sigma, amp float64) {
	for y := 0; y < synCanvas; y++ {
		for x := 0; x < synCanvas; x++ {
			d2 := (float64(y)-cy)*(float64(y)-cy) + (float64(x)-cx)*(float64(x)-cx)
			v := float64(plane[y*synCanvas+x]) + amp*math.Exp(-d2/(2*sigma*sigma))
			plane[y*synCanvas+x] = int16(max(-32000, min(32000, v)))
		}
	}
}

// set generates one split. Each sample draws from its own stream keyed by
// (seed, split, index), so the bytes do not depend on the parallelism.
func (g *synGen) set(n int, split uint64) *Dataset {
	ds := &Dataset{Name: "synthetic", N: n, C: 3, Classes: SyntheticClasses,
		Images: make([]uint8, n*3*Plane), Labels: balancedLabels(n, 10, hash(g.seed, domainSyn, split))}
	workers := max(1, min(runtime.GOMAXPROCS(0), n/256))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			var acc [3 * Plane]int32
			for i := w * n / workers; i < (w+1)*n/workers; i++ {
				r := rng{hash(g.seed, domainSyn, split, uint64(i))}
				g.sample(ds.Image(i), &acc, &g.tpl[ds.Labels[i]], &r)
			}
		})
	}
	wg.Wait()
	return ds
}

// balancedLabels is a seeded permutation of 0,1,..,classes-1,0,1,.. (n long).
func balancedLabels(n, classes int, key uint64) []uint8 {
	l := make([]uint8, n)
	for i := range l {
		l[i] = uint8(i % classes)
	}
	r := rng{key}
	for i := n - 1; i > 0; i-- {
		j := r.intn(i + 1)
		l[i], l[j] = l[j], l[i]
	}
	return l
}
