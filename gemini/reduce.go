package gemini

import (
	"fmt"

	"resnetlab/comm"
	"resnetlab/kernels"
)

// reduce (keeping the operator's chunks keep resident) averages chunk c's gradients over ranks into this rank's fp32
// gradient shard, which goes where c's optimizer chunk lives, and frees the
// gradient buffer. Sharded chunks reduce-scatter (each rank receives the
// average of its own block), replicated chunks all-reduce; both sum in
// rank order on the host communicator, exactly as engine.Engine does, so
// the averages are bit-identical to DDP's and ZeRO's.
func (g *Gemini) reduce(k int, c *chunk, keep []*chunk) {
	o := &c.opt
	var extra int64
	if g.world > 1 {
		extra += 4 * int64(c.size) // fp32 staging of the whole chunk
	}
	if o.on == Device && (g.world == 1 || c.sharded) {
		extra += 4 * int64(c.shardLen)
	}
	g.makeRoom(k, extra, keep)
	if c.grad.on != Device { // makeRoom never evicts keep, which holds c; fetch put it here
		panic(fmt.Sprintf("memory: chunk %d's gradients are on %s at reduction", c.id, c.grad.on))
	}
	g.stats.Reductions++
	g.ready(&c.grad)
	if g.world == 1 && o.on == Host {
		g.offloadGrad(c)
		return
	}
	if g.world == 1 {
		o.g = g.alloc(o.on, kernels.CatGrads, kernels.F32, c.shardLen)
		g.transfer(o.g, o.on, c.grad.t, Device)
		g.freeSlot(&c.grad)
		return
	}
	tmp := g.alloc(Device, kernels.CatGrads, kernels.F32, c.size)
	g.dev.Copy(tmp, c.grad.t)
	g.freeSlot(&c.grad)
	if !c.sharded {
		if err := g.comm.AllReduce(tmp, comm.Avg); err != nil {
			g.fail(fmt.Errorf("gemini: all-reduce of chunk %d's gradients: %w", c.id, err))
		}
		if o.on == Device {
			o.g = tmp // the reduced buffer is the gradient shard itself
			return
		}
		o.g = g.hostGrad(c, c.size)
		g.transfer(o.g, Host, tmp, Device)
		g.release(Device, tmp)
		g.startEarly(c)
		return
	}
	own := kernels.View(tmp, c.ownOff, c.shardLen)
	if err := g.comm.ReduceScatter(own, tmp, comm.Avg); err != nil {
		g.fail(fmt.Errorf("gemini: reduce-scatter of chunk %d's gradients: %w", c.id, err))
	}
	if o.on == Host {
		o.g = g.hostGrad(c, c.shardLen)
	} else {
		o.g = g.alloc(Device, kernels.CatGrads, kernels.F32, c.shardLen)
	}
	g.transfer(o.g, o.on, own, Device)
	g.release(Device, tmp)
	g.startEarly(c)
}

// offloadGrad sends chunk c's gradients (in a world of one they are the
// reduced gradient shard) to its optimizer chunk in host memory through
// the mover, as fp32: backward goes on while they copy. The device buffer
// stays allocated, and counted against the budget, until the copy has
// completed, like an offload's source; the host Adam waits for it.
func (g *Gemini) offloadGrad(c *chunk) {
	g.ready(&c.grad)
	src, o := c.grad.t, &c.opt
	o.g = g.hostGrad(c, c.shardLen)
	s := &slot{t: o.g, on: Host, pend: &pending{mv: g.mv.DownloadAsync(src, o.g.Host), src: src, check: true, grad: c}}
	g.offloads = append(g.offloads, s)
	g.freeing += src.Bytes()
	c.grad = slot{}
	g.stats.GradOffloads++
}
