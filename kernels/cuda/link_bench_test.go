package cuda

import (
	"testing"
	"time"
	"unsafe"

	"resnetlab/kernels"
)

// TestGPUPinnedLink logs the host link's speed for pinned memory: 22 MB
// (an fp16 ResNet-18's weights) as raw DMA each way, each way alone and
// both at once on two streams, and the mover's fp32-to-fp16 upload of the
// same elements (44 MB over the link). It asserts nothing: it is the
// measurement the Gemini budget design rests on (skipped without a GPU).
func TestGPUPinnedLink(t *testing.T) {
	b := device(t)
	const n = 11 << 20 // elements
	host := b.AllocPinned(n)
	back := b.AllocPinned(n)
	defer b.FreePinned(host)
	defer b.FreePinned(back)
	d16 := b.New(kernels.CatWorkspace, kernels.F16, n)
	d16b := b.New(kernels.CatWorkspace, kernels.F16, n)
	defer b.Free(d16)
	defer b.Free(d16b)
	restore := b.bind()
	defer restore()
	var s2 uintptr
	must("cuStreamCreate", drv.cuStreamCreate, uintptr(unsafe.Pointer(&s2)), streamNonBlocking)
	s1 := b.copier().stream
	h := uintptr(unsafe.Pointer(&host[0]))
	hb := uintptr(unsafe.Pointer(&back[0]))
	sync := func(ss ...uintptr) {
		for _, s := range ss {
			must("cuStreamSynchronize", drv.cuStreamSynchronize, s)
		}
	}
	gb := func(bytes int, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }
	for r := range 3 {
		s := time.Now()
		must("up", drv.cuMemcpyHtoDAsync, d16.Dev, h, uintptr(2*n), s1)
		sync(s1)
		up := time.Since(s)
		s = time.Now()
		must("down", drv.cuMemcpyDtoHAsync, hb, d16.Dev, uintptr(2*n), s1)
		sync(s1)
		down := time.Since(s)
		s = time.Now()
		must("up", drv.cuMemcpyHtoDAsync, d16.Dev, h, uintptr(2*n), s1)
		must("down", drv.cuMemcpyDtoHAsync, hb, d16b.Dev, uintptr(2*n), s2)
		sync(s1, s2)
		both := time.Since(s)
		s = time.Now()
		b.Finish(b.UploadAsync(d16, host))
		conv := time.Since(s)
		t.Logf("round %d: raw 2x%d B up %v (%.1f GB/s), down %v (%.1f GB/s), both at once %v (%.1f GB/s total); mover fp32->fp16 upload of %d B %v (%.1f GB/s of link bytes)",
			r, 2*n, up, gb(2*n, up), down, gb(2*n, down), both, gb(4*n, both), 4*n, conv, gb(4*n, conv))
	}
	must("cuStreamDestroy", drv.cuStreamDestroy, s2)
}
