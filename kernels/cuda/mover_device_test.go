package cuda

import (
	"math/rand"
	"testing"
	"time"

	"resnetlab/kernels"
)

// The asynchronous mover on a real stream pair (skipped without a GPU).

// rounded returns n random values exactly representable in dt.
func rounded(n int, dt kernels.DType, seed int64) []float32 {
	r := rand.New(rand.NewSource(seed))
	v := make([]float32, n)
	for i := range v {
		x := float32(r.NormFloat64())
		switch dt {
		case kernels.F16:
			x = kernels.RoundF16(x)
		case kernels.BF16:
			x = kernels.RoundBF16(x)
		}
		v[i] = x
	}
	return v
}

// busy queues a few milliseconds of convolutions on the compute stream, so
// a copy that does not wait for the compute stream would overtake it.
func busy(t *testing.T, b *Backend) func() {
	x := b.New(kernels.CatActivations, kernels.F32, 64, 256, 32, 32)
	w := b.New(kernels.CatParams, kernels.F32, 256, 256, 3, 3)
	y := b.New(kernels.CatActivations, kernels.F32, 64, 256, 32, 32)
	b.Fill(x, 0.01)
	b.Fill(w, 0.01)
	for range 4 {
		b.Conv2dForward(y, x, w, kernels.ConvParams{Stride: 1, Pad: 1})
	}
	return func() {
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		b.Free(x)
		b.Free(w)
		b.Free(y)
	}
}

func TestMoverRoundTripAndOrder(t *testing.T) {
	b := device(t)
	n := bounceElems*3/2 + 7 // more than one bounce piece for halves
	for _, dt := range dtypes {
		vals := rounded(n, dt, int64(dt)+1)
		// The upload goes to a block whose zero fill is queued behind
		// busy work: the copy must come after the fill.
		done := busy(t, b)
		d := b.New(kernels.CatParams, dt, n)
		up := b.UploadAsync(d, vals)
		b.Await(up)
		b.Scale(d, 2) // reads the upload on the compute stream
		// The download must see the Scale, queued just before it.
		got := make([]float32, n)
		down := b.DownloadAsync(d, got)
		b.Finish(down)
		if !up.Done() || !down.Done() {
			t.Fatalf("%s: moves not done after Finish", dt)
		}
		for i := range got {
			if got[i] != 2*vals[i] {
				t.Fatalf("%s: element %d: got %g, want %g (upload, Scale and download out of order?)", dt, i, got[i], 2*vals[i])
			}
		}
		sync := make([]float32, n)
		b.Download(d, sync)
		for i := range sync {
			if sync[i] != got[i] {
				t.Fatalf("%s: element %d: blocking Download %g, DownloadAsync %g", dt, i, sync[i], got[i])
			}
		}
		b.Free(d)
		done()
	}
}

// A download issued right after a kernel that writes its source sees the
// kernel's result, even behind a busy compute stream.
func TestMoverDownloadWaitsForCompute(t *testing.T) {
	b := device(t)
	for _, dt := range dtypes {
		done := busy(t, b)
		d := b.New(kernels.CatActivations, dt, 1<<20)
		b.Fill(d, 3)
		got := make([]float32, d.Len())
		m := b.DownloadAsync(d, got)
		for !m.Done() {
			time.Sleep(10 * time.Microsecond)
		}
		for i, v := range got {
			if v != 3 {
				t.Fatalf("%s: element %d = %g, want 3", dt, i, v)
			}
		}
		b.Free(d)
		done()
	}
}

// The copy stream overlaps the compute stream issued after the copy:
// logged, not asserted (the ratio depends on the machine).
func TestMoverOverlap(t *testing.T) {
	b := device(t)
	const n = 64 << 20 // 256 MiB of fp32
	vals := make([]float32, n)
	d := b.New(kernels.CatParams, kernels.F32, n)
	defer b.Free(d)
	timeIt := func(compute, copy bool) time.Duration {
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var m kernels.Move = kernels.Completed
		if copy { // issued first: it waits only for the compute issued before it
			m = b.UploadAsync(d, vals)
		}
		if compute {
			busy(t, b)()
		}
		b.Finish(m)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	timeIt(true, true) // warm: pinned staging, allocations
	c, x, both := timeIt(true, false), timeIt(false, true), timeIt(true, true)
	t.Logf("compute %v, 256 MiB upload %v, both at once %v (serial would be %v)", c, x, both, c+x)
}

// Moves whose host side is pinned memory (AllocPinned) are DMA without
// staging: the same values in every dtype, behind busy compute work, and a
// pinned buffer freed while its upload runs is not handed out again before
// the upload has read it.
func TestMoverPinnedHost(t *testing.T) {
	b := device(t)
	n := bounceElems*3/2 + 7
	for _, dt := range dtypes {
		vals := rounded(n, dt, int64(dt)+11)
		src := b.AllocPinned(n)
		copy(src, vals)
		done := busy(t, b)
		d := b.New(kernels.CatParams, dt, n)
		up := b.UploadAsync(d, src)
		b.FreePinned(src) // still read by the upload: not reused before it ends
		again := b.AllocPinned(n)
		if &again[0] == &src[0] && !up.Done() {
			t.Fatalf("%s: a pinned buffer was handed out again while its upload was in flight", dt)
		}
		b.Await(up)
		b.Scale(d, 2)
		down := b.DownloadAsync(d, again)
		b.Finish(down)
		for i := range again {
			if again[i] != 2*vals[i] {
				t.Fatalf("%s: element %d: got %g, want %g", dt, i, again[i], 2*vals[i])
			}
		}
		b.FreePinned(again)
		b.Free(d)
		done()
	}
}
