package runner

import (
	"fmt"

	"resnetlab/data"
	"resnetlab/kernels"
)

// inputBuf uploads host batches into a model-dtype tensor. Device backends
// receive fp32 and cast on the device (round to nearest even, as the host
// conversion does, so the values are identical): converting ~300k values on
// the host every step cost more than the whole fp16 step on an H200.
type inputBuf struct{ f32 *kernels.Tensor }

func (b *inputBuf) upload(be kernels.Backend, x *kernels.Tensor, host []float32) {
	if x.DType == kernels.F32 || be.Name() == "cpu" {
		be.Upload(x, host)
		return
	}
	if b.f32 == nil || b.f32.Len() != x.Len() {
		b.free(be)
		b.f32 = be.New(kernels.CatData, kernels.F32, x.Shape...)
	}
	be.Upload(b.f32, host)
	be.Copy(x, b.f32)
}

func (b *inputBuf) free(be kernels.Backend) {
	if b.f32 != nil {
		be.Free(b.f32)
		b.f32 = nil
	}
}

// deviceSet is a data set held in a backend's memory (kernels.Batcher):
// batches are assembled there from the loader's crops, so a step uploads
// 32 bytes of crop and label per image instead of the image. The values are
// the host path's bit for bit (the kernels tests check it).
type deviceSet struct {
	b     kernels.Batcher
	set   *kernels.Images
	crops []data.Crop
	kc    []kernels.Crop
}

// openDeviceSet uploads ds once into be; the error says why be cannot
// build its batches (the caller then uses the host path).
func openDeviceSet(be kernels.Backend, ds *data.Dataset) (*deviceSet, error) {
	b, ok := be.(kernels.Batcher)
	if !ok {
		return nil, fmt.Errorf("the %s backend cannot build batches", be.Name())
	}
	set, err := b.UploadImages(ds.Images, ds.N, ds.C, data.Side, data.Side)
	if err != nil {
		return nil, err
	}
	return &deviceSet{b: b, set: set}, nil
}

// batch fills x (shape [n, C, 32, 32], n = this batch's size) and labels
// with batch step of epoch of l, and returns n.
func (d *deviceSet) batch(l *data.Loader, epoch, step int, x *kernels.Tensor, labels []float32) int {
	if bs := l.BatchSize(); len(d.crops) < bs {
		d.crops, d.kc = make([]data.Crop, bs), make([]kernels.Crop, bs)
	}
	n := l.Crops(epoch, step, d.crops, labels)
	for k, c := range d.crops[:n] {
		d.kc[k] = kernels.Crop{Index: c.Index, DY: c.DY, DX: c.DX, Flip: c.Flip}
	}
	d.b.AugmentBatch(x, d.set, d.kc[:n], data.Pad)
	return n
}

// bytes is the device memory the set occupies.
func (d *deviceSet) bytes() int64 { return d.set.Bytes() }

func (d *deviceSet) free() {
	if d != nil {
		d.b.FreeImages(d.set)
	}
}
