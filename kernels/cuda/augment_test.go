package cuda

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"resnetlab/data"
	"resnetlab/kernels"
)

// randomImages is n random images of c x 32 x 32 bytes (every value occurs).
func randomImages(rng *rand.Rand, n, c int) []uint8 {
	img := make([]uint8, n*c*data.Plane)
	for i := range img {
		img[i] = uint8(rng.Intn(256))
	}
	return img
}

// randomCrops draws k crops of images 0..n-1, the four corner offsets with
// both flips first, and the identity crop (the test transform) last.
func randomCrops(rng *rand.Rand, k, n int) []kernels.Crop {
	cs := make([]kernels.Crop, k)
	for i := range cs {
		cs[i] = kernels.Crop{Index: rng.Intn(n), DY: rng.Intn(2*data.Pad + 1), DX: rng.Intn(2*data.Pad + 1), Flip: rng.Intn(2) == 1}
	}
	for i, c := range [][2]int{{0, 0}, {0, 8}, {8, 0}, {8, 8}} {
		cs[2*i] = kernels.Crop{Index: n - 1 - i, DY: c[0], DX: c[1]}
		cs[2*i+1] = kernels.Crop{Index: i, DY: c[0], DX: c[1], Flip: true}
	}
	cs[k-1] = kernels.Crop{Index: n / 2, DY: data.Pad, DX: data.Pad}
	return cs
}

// skipWithoutAugment skips where the loaded PTX predates augment.cu (a
// RESNETLAB_PTX_DIR build older than it; the embedded PTX has it).
func skipWithoutAugment(tb testing.TB, b *Backend) {
	tb.Helper()
	if !b.mod.has(augmentKernel) {
		tb.Skipf("the loaded PTX has no %s (a RESNETLAB_PTX_DIR build older than it)", augmentKernel)
	}
}

// The GPU's batches equal the CPU backend's (itself tested bit for bit
// against package data's host pipeline) exactly, in every dtype: both
// divide by 255 with correct rounding and round to the dtype to nearest
// even, so any difference is a bug, not rounding.
func TestAugmentBatchMatchesCPU(t *testing.T) {
	e := newEnv(t)
	skipWithoutAugment(t, e.g)
	for _, c := range []int{3, 1} {
		n := 300
		if c == 3 {
			n = 50000 // CIFAR-10's size: image offsets beyond 2^27 bytes
		}
		img := randomImages(e.rng, n, c)
		crops := randomCrops(e.rng, 100, n)
		before := e.g.MemStats().InUse[kernels.CatData]
		gs, err := e.g.UploadImages(img, n, c, data.Side, data.Side)
		if err != nil {
			t.Fatal(err)
		}
		if d := e.g.MemStats().InUse[kernels.CatData] - before; d != int64(len(img)) {
			t.Errorf("UploadImages accounted %d data bytes, want %d", d, len(img))
		}
		cs, _ := e.c.UploadImages(img, n, c, data.Side, data.Side)
		for _, dt := range dtypes {
			x := e.out(dt, len(crops), c, data.Side, data.Side) // GPU side poisoned with NaN
			e.g.AugmentBatch(x.g, gs, crops, data.Pad)
			e.c.AugmentBatch(x.c, cs, crops, data.Pad)
			if err := e.g.Sync(); err != nil {
				t.Fatal(err)
			}
			got, want := download(e.g, x.g), download(e.c, x.c)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					k := i / (c * data.Plane)
					t.Fatalf("C=%d %s: element %d (crop %d %+v) gpu %v, cpu %v", c, dt, i, k, crops[k], got[i], want[i])
				}
			}
			e.free(x)
		}
		e.g.FreeImages(gs)
		e.c.FreeImages(cs)
		if d := e.g.MemStats().InUse[kernels.CatData] - before; d != 0 {
			t.Errorf("%d data bytes still accounted after FreeImages", d)
		}
	}
}

// BenchmarkAugmentBatch: one batch of 100 CIFAR-sized images (fp32 and
// fp16), built on the device from the resident set versus the host path
// (package data's augmentation, then Upload; fp16 via an fp32 upload and a
// device cast, as runner/input.go does). us/call is wall time per batch
// with the device synchronised.
func BenchmarkAugmentBatch(bm *testing.B) {
	g := device(bm)
	skipWithoutAugment(bm, g)
	rng := rand.New(rand.NewSource(1))
	const n, batch = 50000, 100
	img := randomImages(rng, n, 3)
	set, err := g.UploadImages(img, n, 3, data.Side, data.Side)
	if err != nil {
		bm.Fatal(err)
	}
	defer g.FreeImages(set)
	ds := &data.Dataset{Name: "random", Images: img, Labels: make([]uint8, n), N: n, C: 3, Classes: data.CIFAR10Classes}
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
		x := g.New(kernels.CatData, dt, batch, 3, data.Side, data.Side)
		f32 := g.New(kernels.CatData, kernels.F32, batch, 3, data.Side, data.Side)
		xh, yh := make([]float32, batch*ds.ImageLen()), make([]float32, batch)
		crops := make([]data.Crop, batch)
		kc := make([]kernels.Crop, batch)
		loader := data.NewLoader(ds, data.TrainOptions(batch, 1024, 0, 1))
		run := func(name string, step func(s int)) {
			bm.Run(fmt.Sprintf("%s/%s", name, dt), func(bm *testing.B) {
				for i := 0; i < bm.N; i++ {
					step(i % loader.Steps(0))
				}
				if err := g.Sync(); err != nil {
					bm.Fatal(err)
				}
				bm.ReportMetric(float64(bm.Elapsed().Microseconds())/float64(bm.N), "us/call")
			})
		}
		run("device", func(s int) {
			loader.Crops(0, s, crops, yh)
			for k, c := range crops {
				kc[k] = kernels.Crop{Index: c.Index, DY: c.DY, DX: c.DX, Flip: c.Flip}
			}
			g.AugmentBatch(x, set, kc, data.Pad)
		})
		run("host", func(s int) {
			loader.Batch(0, s, xh, yh)
			if dt == kernels.F32 {
				g.Upload(x, xh)
				return
			}
			g.Upload(f32, xh)
			g.Copy(x, f32)
		})
		g.Free(x)
		g.Free(f32)
	}
}
