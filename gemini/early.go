package gemini

import (
	"sync"
	"time"

	"resnetlab/kernels"
)

// Early host Adam. HybridAdam's host half is the longest part of a
// budgeted step, and it cannot wait for the overflow vote without adding
// its whole time after backward. So each host optimizer chunk is updated
// as soon as its gradient shard has arrived, while the GPU still runs the
// rest of backward, out of place into the chunk's second set of buffers
// (optGroup.next). The vote then decides: a step that counts swaps the
// buffers (the update is the in-place one bit for bit: the same
// AdamParams, the same arithmetic); an overflowing step drops them and
// the chunk keeps its state, as if no update had run. The updates run one
// after another in the order their gradients arrived, each on every core.
// Each also stands for the shard's overflow check (gradcheck.go): the
// update reads every gradient anyway and reports an inf or NaN, so the
// host does not scan the shard a second time beside it.
//
// Where the chunk's parameters rest in host memory when its update starts
// (under a tight budget, most of them: backward is done with a chunk once
// its gradients are reduced), the update also rounds the new master
// weights into a spare host payload (optGroup.nextPay), and a step that
// counts swaps that in for the resting one. Otherwise the write-back of
// 11M values would run on every core after the vote, on the step's
// critical path, while the GPU idles.

// adamTo is a host backend with an out-of-place Adam that reports whether
// the gradients held an inf or NaN (the CPU backend's AdamStepTo).
type adamTo interface {
	AdamStepTo(po, mo, vo, p, grad, m, v *kernels.Tensor, hp kernels.AdamParams) (nonFinite bool)
}

// earlyAdam is one step's early updates.
type earlyAdam struct {
	be     adamTo // nil: the host backend cannot update out of place
	on     bool   // this step updates early (set by beginEarly)
	hp     kernels.AdamParams
	last   chan struct{} // closed when the newest update is done
	wg     sync.WaitGroup
	issued map[*chunk]bool // chunks with an early update this step
	// rounded is, per chunk whose update also rounded the new master
	// weights into its spare payload, the host parameter tensor that the
	// spare replaces if it still rests there at the step.
	rounded map[*chunk]*kernels.Tensor
}

// beginEarly arms early updates for a step whose Adam, if the step
// counts, will use hp.
func (g *Gemini) beginEarly(hp kernels.AdamParams) {
	e := &g.early
	e.wait()
	e.on, e.hp, e.last = e.be != nil, hp, nil
	clear(e.issued)
	clear(e.rounded)
}

// startEarly updates chunk c's host optimizer shard in the background
// from its gradient shard, which must be complete, and checks the shard
// for the overflow vote on the way; it reports whether it did.
func (g *Gemini) startEarly(c *chunk) bool {
	e, o := &g.early, &c.opt
	if !e.on || o.on != Host || o.g == nil || e.issued[c] {
		return false
	}
	g.settleWriteBack(o) // the DMA of the last write-back must be done with the buffers written next
	if o.next[0] == nil {
		for i := range o.next {
			o.next[i] = g.allocRaw(Host, kernels.CatOptState, kernels.F32, c.shardLen)
		}
	}
	if e.issued == nil {
		e.issued, e.rounded = map[*chunk]bool{}, map[*chunk]*kernels.Tensor{}
	}
	e.issued[c] = true
	po, mo, vo, p, gr, m, v, hp := o.next[0], o.next[1], o.next[2], o.master, o.g, o.m, o.v, e.hp
	pay := g.spareFor(c)
	prev, done := e.last, make(chan struct{})
	e.last = done
	e.wg.Add(1)
	chk := g.checking(gr)
	go func() {
		defer e.wg.Done()
		defer chk.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		if e.be.AdamStepTo(po, mo, vo, p, gr, m, v, hp) {
			g.chk.bad.Store(true)
		}
		if pay != nil {
			g.host.Copy(pay, po) // rounded to the chunk's dtype, on every core
		}
	}()
	g.stats.EarlyAdam++
	return true
}

// spareFor returns c's spare host payload when c's parameters rest in host
// memory now (then the early update rounds the new weights into it), else
// nil.
func (g *Gemini) spareFor(c *chunk) *kernels.Tensor {
	dst := wbSlot(c)
	if dst.on != Host || dst.pend != nil {
		return nil
	}
	o := &c.opt
	if o.nextPay == nil {
		o.nextPay = g.allocRaw(Host, dst.t.Cat, dst.t.DType, dst.t.Len())
	}
	g.early.rounded[c] = dst.t
	return o.nextPay
}

// takeRounded swaps c's spare payload, rounded by its early update, for
// the host parameters it was rounded for and reports whether it did (not
// when they have moved since). The old tensor is freed, not kept as the
// next spare: a pinned buffer may still be read by an upload's DMA, and
// the allocator reuses it only once that is done.
func (g *Gemini) takeRounded(c *chunk) bool {
	dst, was, spare := wbSlot(c), g.early.rounded[c], c.opt.nextPay
	if was == nil || dst.on != Host || dst.t != was || dst.pend != nil {
		return false
	}
	g.release(Host, was)
	dst.t = spare
	c.opt.nextPay = nil
	g.stats.EarlyWriteBacks++
	return true
}

// wait blocks until every early update issued has finished.
func (e *earlyAdam) wait() { e.wg.Wait() }

// takeEarly waits for the early updates and reports whether c's can stand
// for its Adam step with hp; if so c's buffers are swapped to it.
func (g *Gemini) takeEarly(c *chunk, hp kernels.AdamParams) bool {
	e := &g.early
	if !e.issued[c] {
		return false
	}
	t0 := time.Now()
	e.wait()
	g.ms.hostAdam += time.Since(t0)
	delete(e.issued, c)
	if hp != e.hp {
		return false
	}
	o := &c.opt
	o.master, o.next[0] = o.next[0], o.master
	o.m, o.next[1] = o.next[1], o.m
	o.v, o.next[2] = o.next[2], o.v
	return true
}

// dropEarly forgets c's early update (its optimizer group is moving, or
// the step was skipped) after every update issued has finished.
func (g *Gemini) dropEarly(c *chunk) {
	g.early.wait()
	delete(g.early.issued, c)
}

// releaseNext frees c's second set of optimizer buffers.
func (g *Gemini) releaseNext(c *chunk) {
	g.dropEarly(c)
	for i, t := range c.opt.next {
		g.release(Host, t)
		c.opt.next[i] = nil
	}
	g.release(Host, c.opt.nextPay)
	c.opt.nextPay = nil
}
