package memory

import (
	"fmt"

	"resnetlab/kernels"
)

// The store allocates, frees and moves every tensor Gemini manages, and
// keeps managedDev, the bytes of them on the device, exact: the budget
// logic treats everything else on the device (activations, workspace,
// batch-norm statistics, the input batch) as non-model data.

func (g *Gemini) backend(l Location) kernels.Backend {
	switch l {
	case Device:
		return g.dev
	case Host:
		return g.host
	}
	panic(fmt.Sprintf("memory: no backend for location %s", l))
}

func (g *Gemini) alloc(l Location, cat kernels.Category, dt kernels.DType, n int) *kernels.Tensor {
	t := g.backend(l).New(cat, dt, n)
	if l == Device {
		g.managedDev += t.Bytes()
	}
	return t
}

func (g *Gemini) release(l Location, t *kernels.Tensor) {
	if t == nil {
		return
	}
	g.backend(l).Free(t)
	if l == Device {
		g.managedDev -= t.Bytes()
	}
}

// staging returns a host float32 buffer of n elements, reused across moves.
func (g *Gemini) staging(n int) []float32 {
	if cap(g.stage) < n {
		g.stage = make([]float32, n)
	}
	return g.stage[:n]
}

// transfer copies src (on from) into dst (on to), converting to dst's
// dtype: a backend Copy when both share a location, else Download and
// Upload through host staging. A half-precision tensor on the device is
// cast there, through an fp32 device temporary when the budget allows, so
// the host moves plain fp32 (a device backend converts halves on the host
// otherwise, which is slow). Values are the same either way: casts to a
// narrow type round to nearest even everywhere, and widening is exact.
func (g *Gemini) transfer(dst *kernels.Tensor, to Location, src *kernels.Tensor, from Location) {
	n := src.Len()
	if from == to {
		g.backend(to).Copy(dst, src)
		return
	}
	buf := g.staging(n)
	devT := src
	if to == Device {
		devT = dst
	}
	if devT.DType == kernels.F32 || !g.fitsNow(4*int64(n)) {
		g.backend(from).Download(src, buf)
		g.backend(to).Upload(dst, buf)
		return
	}
	tmp := g.alloc(Device, kernels.CatWorkspace, kernels.F32, n)
	defer g.release(Device, tmp)
	if from == Device {
		g.dev.Copy(tmp, src)
		g.dev.Download(tmp, buf)
		g.host.Upload(dst, buf)
		return
	}
	g.host.Download(src, buf)
	g.dev.Upload(tmp, buf)
	g.dev.Copy(dst, tmp)
}

// moveTensor re-creates t on to with the same contents and frees the original.
func (g *Gemini) moveTensor(t *kernels.Tensor, from, to Location) *kernels.Tensor {
	nt := g.alloc(to, t.Cat, t.DType, t.Len())
	g.transfer(nt, to, t, from)
	g.release(from, t)
	return nt
}

// moveSlot moves one part of chunk c to location to and reports it.
func (g *Gemini) moveSlot(c *chunk, part Part, s *slot, to Location) {
	if s.on == to || s.on == Nowhere {
		return
	}
	from, bytes := s.on, s.t.Bytes()
	s.t = g.moveTensor(s.t, from, to)
	s.on = to
	g.stats.Moves++
	g.stats.BytesMoved += bytes
	g.emit(MoveEvent{Rank: g.rank, Chunk: c.id, Part: part, From: from, To: to, Bytes: bytes})
}

// moveOpt moves a chunk's optimizer group (master, moments, and the
// gradient shard when present).
func (g *Gemini) moveOpt(c *chunk, to Location) {
	o := &c.opt
	if o.on == to {
		return
	}
	from := o.on
	bytes := o.master.Bytes() * 3
	o.master = g.moveTensor(o.master, from, to)
	o.m = g.moveTensor(o.m, from, to)
	o.v = g.moveTensor(o.v, from, to)
	if o.g != nil {
		bytes += o.g.Bytes()
		o.g = g.moveTensor(o.g, from, to)
	}
	o.on = to
	g.stats.Moves++
	g.stats.BytesMoved += bytes
	g.emit(MoveEvent{Rank: g.rank, Chunk: c.id, Part: PartOptim, From: from, To: to, Bytes: bytes})
}

func (g *Gemini) freeSlot(s *slot) {
	g.release(s.on, s.t)
	*s = slot{}
}

func (g *Gemini) emit(e any) {
	if g.cfg.OnEvent != nil {
		g.cfg.OnEvent(e)
	}
}
