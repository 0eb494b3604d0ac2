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
}

// beginEarly arms early updates for a step whose Adam, if the step
// counts, will use hp.
func (g *Gemini) beginEarly(hp kernels.AdamParams) {
	e := &g.early
	e.wait()
	e.on, e.hp, e.last = e.be != nil, hp, nil
	clear(e.issued)
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
		e.issued = map[*chunk]bool{}
	}
	e.issued[c] = true
	po, mo, vo, p, gr, m, v, hp := o.next[0], o.next[1], o.next[2], o.master, o.g, o.m, o.v, e.hp
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
	}()
	g.stats.EarlyAdam++
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
}
