package cuda

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"resnetlab/kernels"
)

var _ kernels.Batcher = (*Backend)(nil)

// augmentKernel is the kernel of src/augment.cu.
const augmentKernel = "augment_batch"

// cropEntry mirrors Crop in src/augment.cu.
type cropEntry struct{ Idx, DY, DX, Flip int32 }

// UploadImages copies the data set to the device once (accounted as
// CatData). It returns an error, and the caller builds batches on the host,
// when the loaded PTX predates src/augment.cu or the set does not fit.
func (b *Backend) UploadImages(images []uint8, n, c, h, w int) (s *kernels.Images, err error) {
	if err := kernels.CheckImages(images, n, c, h, w); err != nil {
		return nil, err
	}
	if n > math.MaxInt32 || c*h*w > math.MaxInt32 {
		return nil, fmt.Errorf("cuda: UploadImages: [%d,%d,%d,%d] too large for int32 indices", n, c, h, w)
	}
	defer b.bind()()
	if b.capturing {
		return nil, errors.New("cuda: UploadImages during a graph capture")
	}
	if _, ok := b.mod.lookup(augmentKernel); !ok {
		return nil, fmt.Errorf("cuda: kernel %s is in none of the PTX modules %v (run kernels/cuda/gen.sh)", augmentKernel, b.mod.names)
	}
	s = &kernels.Images{N: n, C: c, H: h, W: w, Owner: b}
	nb := s.Bytes()
	if nb == 0 {
		return s, nil
	}
	defer func() { // out of memory: an error, so the caller falls back to host batches
		if r := recover(); r != nil {
			var e *Error
			if re, ok := r.(error); !ok || !errors.As(re, &e) || e.Code != errOutOfMemory {
				panic(r)
			}
			s, err = nil, fmt.Errorf("cuda: UploadImages: no room for the %d-byte data set: %w", nb, e)
		}
	}()
	s.Dev = b.alloc.get(nb, kernels.CatData)
	// Once per run: wait for the copy, so images may change afterwards.
	must("cuMemcpyHtoDAsync_v2(images)", drv.cuMemcpyHtoDAsync, s.Dev, uintptr(unsafe.Pointer(&images[0])), uintptr(nb), b.stream)
	must("cuStreamSynchronize", drv.cuStreamSynchronize, b.stream)
	return s, nil
}

// FreeImages returns the data set's memory to the allocator's cache.
func (b *Backend) FreeImages(s *kernels.Images) {
	if s == nil || s.Dev == 0 {
		return
	}
	b.ownsImages("FreeImages", s)
	b.alloc.put(s.Dev, s.Bytes(), kernels.CatData)
	s.Dev = 0
}

// AugmentBatch uploads the batch's crops (16 bytes a sample) into scratch
// and gathers the images from the resident set in one launch.
func (b *Backend) AugmentBatch(x *kernels.Tensor, src *kernels.Images, crops []kernels.Crop, pad int) {
	defer b.bind()()
	b.owns("AugmentBatch", x)
	kernels.CheckAugment(x, src, crops, pad)
	b.ownsImages("AugmentBatch", src)
	b.noCapture("AugmentBatch")
	n := len(crops)
	if x.Len() == 0 {
		return
	}
	tab := make([]cropEntry, n)
	for k, c := range crops {
		tab[k] = cropEntry{Idx: int32(c.Index), DY: int32(c.DY), DX: int32(c.DX)}
		if c.Flip {
			tab[k].Flip = 1
		}
	}
	size := int64(n) * int64(unsafe.Sizeof(tab[0]))
	p := b.workspace(size)
	// A copy from pageable memory is staged before the call returns (as in
	// Upload); stream order puts it before the launch.
	must("cuMemcpyHtoDAsync_v2(crops)", drv.cuMemcpyHtoDAsync, p, uintptr(unsafe.Pointer(&tab[0])), uintptr(size), b.stream)
	b.args.reset().ptr(x.Dev).i32(int(x.DType)).ptr(src.Dev).ptr(p).i32(n).i32(src.C).i32(src.H).i32(src.W).i32(pad)
	b.launch(augmentKernel, b.gridFor(x.Len()), 1, 1, 256)
	b.release(p, size)
}

func (b *Backend) ownsImages(op string, s *kernels.Images) {
	if s.Owner != kernels.Backend(b) {
		panic(fmt.Sprintf("cuda: %s: %v belongs to another backend", op, s))
	}
	if s.Dev == 0 && s.Bytes() > 0 {
		panic(fmt.Sprintf("cuda: %s: %v was freed", op, s))
	}
}
