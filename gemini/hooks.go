package gemini

import (
	"fmt"

	"resnetlab/kernels"
	"resnetlab/model"
)

// Gemini implements model.Hooks: every conv, bn and fc calls these around
// its forward and backward.

func (g *Gemini) PreForward(m model.Module)   { g.pre(m, false) }
func (g *Gemini) PreBackward(m model.Module)  { g.pre(m, true) }
func (g *Gemini) PostForward(m model.Module)  { g.post(m, false) }
func (g *Gemini) PostBackward(m model.Module) { g.post(m, true) }

// opName identifies a hook call in the traced operator order.
func opName(m model.Module, pre, bwd bool) string {
	when, dir := "post", "fwd"
	if pre {
		when = "pre"
	}
	if bwd {
		dir = "bwd"
	}
	return fmt.Sprintf("%s-%s %s", when, dir, m.Name())
}

// pre makes the module's chunks resident on the device (FREE/HOLD ->
// COMPUTE) and points its parameters (and in backward their gradients) at
// views of the chunk buffers.
func (g *Gemini) pre(m model.Module, bwd bool) {
	k := g.enter(opName(m, true, bwd))
	g.poll()
	ts := g.tensorsOf(m)
	cs := chunksOf(ts)
	if g.tracing() {
		for _, c := range cs {
			c.uses = append(c.uses, k)
		}
		g.tr.users[k] = cs
	}
	g.makeRoom(k, g.fetchBytes(k, cs, bwd), cs)
	for _, c := range cs {
		g.fetch(k, c, bwd)
		if !g.training {
			g.clock++
			c.lastUse = g.clock
		}
	}
	g.prefetch(k, cs)
	for _, t := range ts {
		g.transition(t, Compute)
		t.p.W = kernels.View(t.c.payload.t, t.off, t.shape...)
		if bwd {
			t.p.G = kernels.View(t.c.grad.t, t.off, t.shape...)
		}
	}
	for _, c := range cs {
		for _, t := range c.tensors {
			if t.state == Free { // the rest of a freshly gathered chunk
				g.transition(t, Hold)
			}
		}
	}
	g.snapshot(k, m, true, bwd)
	g.exit(k)
}

// post ends the module's use: forward COMPUTE -> HOLD; backward COMPUTE ->
// HOLD_AFTER_BWD -> READY_FOR_REDUCE, and a chunk whose tensors are all
// ready is reduced (-> HOLD). Chunks nobody needs before the next operator
// are released or sent home.
func (g *Gemini) post(m model.Module, bwd bool) {
	k := g.enter(opName(m, false, bwd))
	g.poll()
	ts := g.tensorsOf(m)
	cs := chunksOf(ts)
	for _, t := range ts {
		if !bwd {
			g.transition(t, Hold)
			continue
		}
		g.transition(t, HoldAfterBwd)
	}
	if bwd {
		g.snapshot(k, m, false, bwd) // the only moment HOLD_AFTER_BWD is visible
		for _, t := range ts {
			g.transition(t, ReadyForReduce) // the module wrote its whole gradient
		}
	}
	soon := g.window(k)
	for _, c := range cs {
		if bwd && c.allIn(ReadyForReduce) {
			g.reduce(k, c, cs)
			for _, t := range c.tensors {
				g.transition(t, Hold)
			}
		}
		if c.sharded || !inWindow(soon, c) { // prefetch would bring it right back
			g.afterUse(c)
		}
	}
	g.makeRoom(k, 0, nil)
	g.prefetch(k, nil)
	g.snapshot(k, m, false, bwd)
	g.exit(k)
}

// tensorsOf lists the module's parameters' tensor records.
func (g *Gemini) tensorsOf(m model.Module) []*tensorInfo {
	ps := m.Params()
	ts := make([]*tensorInfo, len(ps))
	for i, p := range ps {
		t, ok := g.byParam[p]
		if !ok {
			panic(fmt.Sprintf("memory: module %s has parameter %s that Gemini does not manage", m.Name(), p.Name))
		}
		ts[i] = t
	}
	return ts
}

// chunksOf lists the distinct chunks of ts in order.
func chunksOf(ts []*tensorInfo) []*chunk {
	var cs []*chunk
	for _, t := range ts {
		if len(cs) == 0 || cs[len(cs)-1] != t.c {
			cs = append(cs, t.c)
		}
	}
	return cs
}

// fetchBytes is the device memory fetching cs takes.
func (g *Gemini) fetchBytes(k int, cs []*chunk, bwd bool) int64 {
	var n int64
	for _, c := range cs {
		if c.payload.on != Device {
			n += c.payloadBytes()
		}
		if bwd && c.grad.on != Device {
			n += c.payloadBytes()
		}
	}
	return n
}

// shardComesHome reports whether fetching c also brings its shard back to
// the device: only for device-homed chunks, once the statistics allow
// keeping more than the operator's own chunks, and when it fits without
// evicting anything (it only saves a later upload).
func (g *Gemini) shardComesHome(k int, c *chunk) bool {
	return c.home == Device && !g.conservative(k) && g.fits(k, c.ownBytes())
}

// fetch makes c's full payload (and in backward its gradient buffer)
// resident on the device: a move from host memory, or for a released
// sharded chunk an all-gather of the shards.
func (g *Gemini) fetch(k int, c *chunk, bwd bool) {
	switch c.payload.on {
	case Host:
		g.moveSlot(c, PartPayload, &c.payload, Device)
	case Nowhere:
		g.gather(k, c)
	}
	g.ready(&c.payload) // the operator's kernels wait for the upload
	if bwd {
		switch c.grad.on {
		case Host:
			g.moveSlot(c, PartGrad, &c.grad, Device)
		case Nowhere:
			c.grad = slot{t: g.alloc(Device, kernels.CatGrads, c.dt, c.size), on: Device}
		}
		g.ready(&c.grad)
	}
}

// gather rebuilds a sharded chunk's full payload on the device from every
// rank's shard (in place: this rank's shard is copied into its block).
func (g *Gemini) gather(k int, c *chunk) {
	full := g.alloc(Device, kernels.CatParams, c.dt, c.size)
	own := kernels.View(full, c.ownOff, c.shardLen)
	g.ready(&c.shard)
	g.transfer(own, Device, c.shard.t, c.shard.on)
	if err := g.comm.AllGather(full, own); err != nil {
		g.fail(fmt.Errorf("gemini: all-gather of chunk %d: %w", c.id, err))
	}
	c.payload = slot{t: full, on: Device}
	g.stats.Gathers++
	if c.shard.on == Host && g.shardComesHome(k, c) {
		g.moveSlot(c, PartShard, &c.shard, Device)
	}
}

// afterUse releases a chunk whose tensors are all HOLD: a sharded chunk
// drops its full payload (HOLD -> FREE; its shard persists), a chunk
// homed in host memory goes back there. A chunk still in backward stays.
func (g *Gemini) afterUse(c *chunk) {
	if !c.allIn(Hold) {
		return
	}
	if c.sharded {
		if c.payload.on != Nowhere {
			g.freeSlot(&c.payload)
			for _, t := range c.tensors {
				g.transition(t, Free)
			}
		}
		return
	}
	if c.home == Host {
		g.moveSlot(c, PartPayload, &c.payload, Host)
	}
}

func (g *Gemini) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}
