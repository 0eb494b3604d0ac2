package gemini

import (
	"fmt"
	"time"

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

// alloc returns a zero-filled tensor on l.
func (g *Gemini) alloc(l Location, cat kernels.Category, dt kernels.DType, n int) *kernels.Tensor {
	t := g.allocRaw(l, cat, dt, n)
	if g.pinned[t] {
		clear(t.Host)
	}
	return t
}

// allocRaw is alloc for a tensor the caller overwrites whole (the
// destination of a move or copy): pinned host memory is not cleared.
func (g *Gemini) allocRaw(l Location, cat kernels.Category, dt kernels.DType, n int) *kernels.Tensor {
	if l == Host && g.pin != nil {
		t := g.hostAdopt.Adopt(cat, dt, g.pin.AllocPinned(n), n)
		g.pinned[t] = true
		g.pinnedBytes += 4 * int64(n)
		return t
	}
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
	buf := t.Host
	g.backend(l).Free(t)
	if l == Device {
		g.managedDev -= t.Bytes()
	}
	if g.pinned[t] {
		delete(g.pinned, t)
		g.pinnedBytes -= 4 * int64(len(buf))
		g.pin.FreePinned(buf)
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
	nt := g.allocRaw(to, t.Cat, t.DType, t.Len())
	g.transfer(nt, to, t, from)
	g.release(from, t)
	return nt
}

// moveSlot moves one part of chunk c to location to and reports it.
func (g *Gemini) moveSlot(c *chunk, part Part, s *slot, to Location) {
	g.startMove(c, part, s, to, false)
}

// startMove issues the move of one part of chunk c between the device and
// host memory through the mover and reports it. The destination is
// allocated now (an upload's device bytes count against the budget from
// its issue); an upload's host source is freed at once (the mover has
// taken the values); an offload's device source stays allocated until the
// move completes (ready, poll or reclaim).
func (g *Gemini) startMove(c *chunk, part Part, s *slot, to Location, prefetch bool) {
	if s.on == to || s.on == Nowhere {
		return
	}
	if to == Device && s.pend != nil && s.pend.src != nil && !s.pend.mv.Done() {
		g.revive(s)
		return
	}
	g.ready(s)
	from, old := s.on, s.t
	if to == Host && s.clean != nil {
		g.dropClean(c, part, s)
		return
	}
	nt := g.allocRaw(to, old.Cat, old.DType, old.Len())
	// The host backend is the CPU backend: its tensors' storage is the
	// float32 values themselves, already rounded to the tensor's dtype, so
	// the mover reads and writes it directly (by DMA when it is pinned; a
	// pinned upload source may be freed at once, the mover reuses it only
	// after the copy).
	if to == Device {
		mv := g.mv.UploadAsync(nt, old.Host)
		*s = slot{t: nt, on: Device, pend: &pending{mv: mv}}
		if part == PartPayload {
			s.clean = old // read by the DMA while it runs; never written before dirty
		} else {
			g.release(Host, old)
		}
	} else {
		mv := g.mv.DownloadAsync(old, nt.Host)
		*s = slot{t: nt, on: Host, pend: &pending{mv: mv, src: old}}
		g.offloads = append(g.offloads, s)
		g.freeing += old.Bytes()
	}
	bytes := old.Bytes()
	g.stats.Moves++
	g.stats.BytesMoved += bytes
	if prefetch {
		g.stats.Prefetches++
	}
	g.emit(MoveEvent{Rank: g.rank, Chunk: c.id, Part: part, From: from, To: to, Bytes: bytes, Prefetch: prefetch})
}

// dropClean evicts a device payload whose host copy is current: the
// device tensor is freed (the allocator reuses it in compute-stream order,
// after the kernels already issued that read it) and the slot is the host
// copy again. It is reported as a move of 0 bytes, so that a consumer
// tracking where each chunk lives sees it leave the device.
func (g *Gemini) dropClean(c *chunk, part Part, s *slot) {
	g.release(Device, s.t)
	*s = slot{t: s.clean, on: Host}
	g.stats.CleanDrops++
	g.emit(MoveEvent{Rank: g.rank, Chunk: c.id, Part: part, From: Device, To: Host, Clean: true})
}

// dirty forgets s's clean host copy before its device tensor is written.
func (g *Gemini) dirty(s *slot) {
	if s.clean != nil {
		g.release(Host, s.clean)
		s.clean = nil
	}
}

// ready completes s's move in flight before anything else touches s: the
// compute stream waits for an upload (the host does not); an offload is
// finished (the host waits) and its device source freed. A move still in
// flight at this point is a stall.
func (g *Gemini) ready(s *slot) {
	p := s.pend
	if p == nil {
		return
	}
	inFlight := !p.mv.Done()
	if inFlight {
		g.stats.Stalls++
	}
	s.pend = nil
	if p.src == nil {
		g.mv.Await(p.mv)
		return
	}
	t0 := time.Now()
	g.mv.Finish(p.mv)
	if inFlight {
		g.ms.wait += time.Since(t0)
	}
	g.release(Device, p.src)
	g.freeing -= p.src.Bytes()
	g.dropOffload(s)
	early := p.grad != nil && g.startEarly(p.grad) // the early update checks the shard too
	if p.check && !early {
		g.startGradCheck(s.t)
	}
}

// revive takes back an offload still in flight: its device source is
// still allocated and holds the values, so it becomes the slot's tensor
// again and the host copy is dropped (the copy completes into it unread).
// Nothing moves: no MoveEvent, no stall.
func (g *Gemini) revive(s *slot) {
	p := s.pend
	g.release(Host, s.t)
	*s = slot{t: p.src, on: Device}
	g.freeing -= p.src.Bytes()
	g.dropOffload(s)
	g.stats.Revived++
}

func (g *Gemini) dropOffload(s *slot) {
	for i, o := range g.offloads {
		if o == s {
			g.offloads = append(g.offloads[:i], g.offloads[i+1:]...)
			return
		}
	}
}

// poll completes the offloads that have finished, without waiting.
func (g *Gemini) poll() {
	for i := 0; i < len(g.offloads); {
		if s := g.offloads[i]; s.pend.mv.Done() {
			g.ready(s) // removes s from g.offloads
			continue
		}
		i++
	}
}

// reclaim finishes offloads, oldest first, until need (a function of
// managedDev) fits the budget b or none is left in flight.
func (g *Gemini) reclaim(b int64, need func() int64) {
	for len(g.offloads) > 0 && need() > b {
		g.ready(g.offloads[0])
	}
}

// finishOffloads completes every offload in flight.
func (g *Gemini) finishOffloads() {
	for len(g.offloads) > 0 {
		g.ready(g.offloads[0])
	}
}

// settleAll completes every move in flight (state, checkpoint, Free).
func (g *Gemini) settleAll() {
	g.finishOffloads()
	g.chk.wg.Wait()
	g.early.wait()
	for _, c := range g.chunks {
		g.ready(&c.payload)
		g.ready(&c.shard)
		g.ready(&c.grad)
		g.settleWriteBack(&c.opt)
	}
}

// moveOpt moves a chunk's optimizer group (master, moments, and the
// gradient shard when present).
func (g *Gemini) moveOpt(c *chunk, to Location) {
	o := &c.opt
	if o.on == to {
		return
	}
	from := o.on
	g.settleWriteBack(o)
	g.releaseNext(c)
	g.release(Host, o.spareG)
	o.spareG = nil
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
	g.ready(s)
	g.dirty(s)
	g.release(s.on, s.t)
	*s = slot{}
}
