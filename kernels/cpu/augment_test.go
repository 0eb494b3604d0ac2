package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"resnetlab/data"
	"resnetlab/kernels"
)

// randomSet is a data set of n random images (every byte value occurs).
func randomSet(n, c int, seed uint64) *data.Dataset {
	rng := newRNG(seed)
	ds := &data.Dataset{Name: "random", N: n, C: c, Images: make([]uint8, n*c*data.Plane),
		Labels: make([]uint8, n), Classes: data.CIFAR10Classes}
	for i := range ds.Images {
		ds.Images[i] = uint8(rng.IntN(256))
	}
	for i := range ds.Labels {
		ds.Labels[i] = uint8(rng.IntN(10))
	}
	return ds
}

// hostBatch is the host pipeline: data.Augment into float32, then the
// rounding Upload applies for dt.
func hostBatch(ds *data.Dataset, crops []kernels.Crop, dt kernels.DType) []float32 {
	il := ds.ImageLen()
	out := make([]float32, len(crops)*il)
	for k, c := range crops {
		data.Augment(out[k*il:(k+1)*il], ds.Image(c.Index), ds.C, c.DY, c.DX, c.Flip)
	}
	roundSlice(dt, out)
	return out
}

// The backend op equals the host augmentation bit for bit, for random
// images, indices, offsets (the corners 0 and 8 included) and flips.
func TestAugmentBatchMatchesHost(t *testing.T) {
	for _, c := range []int{3, 1} {
		ds := randomSet(37, c, uint64(c))
		rng := newRNG(uint64(10 + c))
		crops := make([]kernels.Crop, 64)
		for k := range crops {
			crops[k] = kernels.Crop{Index: rng.IntN(ds.N), DY: rng.IntN(2*data.Pad + 1),
				DX: rng.IntN(2*data.Pad + 1), Flip: rng.IntN(2) == 1}
		}
		for k, corner := range [][2]int{{0, 0}, {0, 8}, {8, 0}, {8, 8}} { // the extremes, both flips
			crops[2*k] = kernels.Crop{Index: k, DY: corner[0], DX: corner[1]}
			crops[2*k+1] = kernels.Crop{Index: k, DY: corner[0], DX: corner[1], Flip: true}
		}
		for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
			b := New(WithWorkers(3))
			set, err := b.UploadImages(ds.Images, ds.N, ds.C, data.Side, data.Side)
			if err != nil {
				t.Fatal(err)
			}
			x := b.New(kernels.CatData, dt, len(crops), c, data.Side, data.Side)
			b.Fill(x, float32(math.NaN())) // an element the op skips stays NaN
			b.AugmentBatch(x, set, crops, data.Pad)
			sameBits(t, fmt.Sprintf("C=%d %s", c, dt), x.Host, hostBatch(ds, crops, dt))
			b.FreeImages(set)
		}
	}
}

// A loader's Crops fed to AugmentBatch give the batches its Batch builds
// (uploaded as Upload rounds them), for training (shuffled, augmented, two
// ranks) and test (in order, last partial batch) loaders.
func TestAugmentBatchEqualsLoaderBatch(t *testing.T) {
	ds := randomSet(53, 3, 7)
	loaders := map[string]*data.Loader{
		"train rank 1/2": data.NewLoader(ds, data.TrainOptions(8, 1024, 1, 2)),
		"test":           data.NewLoader(ds, data.LoaderOptions{Batch: 16}),
	}
	for name, l := range loaders {
		for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
			b := New()
			set, err := b.UploadImages(ds.Images, ds.N, ds.C, data.Side, data.Side)
			if err != nil {
				t.Fatal(err)
			}
			bs := l.BatchSize()
			xh, yh, yc := make([]float32, bs*ds.ImageLen()), make([]float32, bs), make([]float32, bs)
			dc, kc := make([]data.Crop, bs), make([]kernels.Crop, bs)
			for epoch := 0; epoch < 2; epoch++ {
				for s := 0; s < l.Steps(epoch); s++ {
					n := l.Batch(epoch, s, xh, yh)
					if m := l.Crops(epoch, s, dc, yc); m != n {
						t.Fatalf("%s: Crops gives %d samples, Batch %d", name, m, n)
					}
					for k := 0; k < n; k++ {
						kc[k] = kernels.Crop{Index: dc[k].Index, DY: dc[k].DY, DX: dc[k].DX, Flip: dc[k].Flip}
					}
					want := b.New(kernels.CatData, dt, n, ds.C, data.Side, data.Side)
					b.Upload(want, xh[:n*ds.ImageLen()])
					x := b.New(kernels.CatData, dt, n, ds.C, data.Side, data.Side)
					b.AugmentBatch(x, set, kc[:n], data.Pad)
					what := fmt.Sprintf("%s %s epoch %d step %d", name, dt, epoch, s)
					sameBits(t, what, x.Host, want.Host)
					sameBits(t, what+" labels", yc[:n], yh[:n])
					b.Free(x)
					b.Free(want)
				}
			}
			b.FreeImages(set)
		}
	}
}

func TestImagesAccounting(t *testing.T) {
	b := New()
	ds := randomSet(5, 3, 1)
	set, err := b.UploadImages(ds.Images, ds.N, ds.C, data.Side, data.Side)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.MemStats().InUse[kernels.CatData], int64(len(ds.Images)); got != want {
		t.Fatalf("data bytes in use %d after UploadImages, want %d", got, want)
	}
	b.FreeImages(set)
	b.FreeImages(set) // a second free is a no-op
	if got := b.MemStats().InUse[kernels.CatData]; got != 0 {
		t.Fatalf("data bytes in use %d after FreeImages, want 0", got)
	}
	if _, err := b.UploadImages(ds.Images[1:], ds.N, ds.C, data.Side, data.Side); err == nil ||
		!strings.Contains(err.Error(), "want 15360") {
		t.Fatalf("short image buffer: err = %v, want a size error", err)
	}
}

func TestAugmentBatchRejectsBadCrops(t *testing.T) {
	b := New()
	ds := randomSet(4, 1, 2)
	set, _ := b.UploadImages(ds.Images, ds.N, ds.C, data.Side, data.Side)
	x := b.New(kernels.CatData, kernels.F32, 1, 1, data.Side, data.Side)
	for _, c := range []kernels.Crop{{Index: 4}, {Index: -1}, {DY: 9}, {DX: -1}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "out of range") {
					t.Errorf("crop %+v: panic %v, want out of range", c, r)
				}
			}()
			b.AugmentBatch(x, set, []kernels.Crop{c}, data.Pad)
		}()
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "want shape") {
				t.Errorf("two crops for one image: panic %v, want a shape error", r)
			}
		}()
		b.AugmentBatch(x, set, []kernels.Crop{{}, {}}, data.Pad)
	}()
}
