package gemini

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// The device budget. Before each operator (hook k) Gemini frees device
// memory until its own bytes, the non-model bytes in use now, the bytes the
// hook is about to allocate and the traced growth of the segment after
// hook k fit the budget. Victims are the chunks (not needed by the
// operator) whose next use is farthest away in the traced order (Belady);
// evicting a chunk moves its payload, gradient buffer and shard to host
// memory. Optimizer chunks are placed by the policy and not evicted here.
// Before statistics exist (warm-up, an evaluation before the first step)
// it is conservative: only the operator's own chunks stay on the device.
// Outside Step once they exist (evaluation), chunks stay where they are
// until the operator's bytes, with the traced non-model peak of a training
// step standing for the evaluation's (it saves no activations for backward,
// so it needs less) and a margin, would break the budget; then the chunk used most
// recently goes first: the forward visits the chunks in the same order
// batch after batch, so that one is needed again last (Belady on a cycle).

// conservative reports whether hook k runs without statistics under a budget.
func (g *Gemini) conservative(k int) bool {
	return g.cfg.DeviceBudget > 0 && !g.planned(k)
}

// nonModelNow is the device bytes in use that Gemini does not manage.
func (g *Gemini) nonModelNow() int64 { return g.dev.MemStats().Total() - g.managedDev }

// makeRoom evicts chunks other than keep until extra more bytes (and the
// traced growth after hook k) fit the budget.
func (g *Gemini) makeRoom(k int, extra int64, keep []*chunk) {
	b := g.cfg.DeviceBudget
	if b == 0 {
		return
	}
	if !g.training && g.tr.done {
		g.makeRoomOutsideStep(extra, keep)
		return
	}
	if g.conservative(k) {
		for _, c := range g.chunks {
			if !contains(keep, c) {
				g.evict(c)
			} else {
				g.moveSlot(c, PartShard, &c.shard, Host)
			}
		}
		g.finishOffloads()
		if need := g.managedDev + extra + g.nonModelNow(); need > b {
			g.noteOver(k, need)
		}
		return
	}
	// Offloads in flight free their bytes when they complete: evict until
	// the budget fits counting them as freed, then wait for as many of
	// them as the operator needs now.
	need := func() int64 { return g.managedDev + extra + g.nonModelNow() + g.tr.growth[k] }
	for need()-g.freeing > b {
		if c := g.farthest(k, keep); c != nil {
			g.evict(c)
			continue
		}
		if c := shardOnDevice(keep); c != nil { // the operator reads the payload, not the shard
			g.moveSlot(c, PartShard, &c.shard, Host)
			continue
		}
		break
	}
	g.reclaim(b, need)
	if n := need(); n > b {
		g.noteOver(k, n)
	}
}

// makeRoomOutsideStep evicts, most recently used first, until extra more
// bytes fit the budget beside a training step's non-model peak, less a
// margin of 1/32 of the budget: an evaluation's operators may pick other
// algorithms and workspaces than the traced training step's (on the GPU
// one took 0.6% more at 1/4 of the unbudgeted peak).
func (g *Gemini) makeRoomOutsideStep(extra int64, keep []*chunk) {
	b := g.cfg.DeviceBudget - g.cfg.DeviceBudget/32
	need := func() int64 { return g.managedDev + extra + max(g.nonModelNow(), g.tr.nonModel) }
	for need()-g.freeing > b {
		c := g.mostRecent(keep)
		if c == nil {
			break
		}
		g.evict(c)
	}
	g.reclaim(b, need)
}

// mostRecent is the evictable chunk outside keep that an operator outside
// Step fetched last (nil when none is left).
func (g *Gemini) mostRecent(keep []*chunk) *chunk {
	var best *chunk
	for _, c := range g.chunks {
		if evictable(c) && !contains(keep, c) && (best == nil || c.lastUse > best.lastUse) {
			best = c
		}
	}
	return best
}

// shardOnDevice is a chunk of cs whose shard is on the device, or nil.
func shardOnDevice(cs []*chunk) *chunk {
	for _, c := range cs {
		if c.shard.on == Device {
			return c
		}
	}
	return nil
}

// fits reports whether extra more device bytes fit the budget at hook k
// without evicting (always, without a budget).
func (g *Gemini) fits(k int, extra int64) bool {
	b := g.cfg.DeviceBudget
	if b == 0 {
		return true
	}
	growth := int64(0)
	if g.planned(k) {
		growth = g.tr.growth[k]
	}
	return g.managedDev+extra+g.nonModelNow()+growth <= b
}

// fitsNow reports whether a temporary of extra bytes, freed before the
// next operator runs, fits the budget now.
func (g *Gemini) fitsNow(extra int64) bool {
	b := g.cfg.DeviceBudget
	return b == 0 || g.managedDev+extra+g.nonModelNow() <= b
}

func (g *Gemini) noteOver(k int, need int64) {
	if g.overNote != "" {
		return
	}
	op := "outside the traced step"
	if k >= 0 && k < len(g.tr.ops) {
		op = g.tr.ops[k]
	}
	g.overNote = fmt.Sprintf("at %s the device needs %s (%s of chunks, %s non-model) with only the operator's chunks resident",
		op, formatSize(need), formatSize(g.managedDev), formatSize(g.nonModelNow()))
}

// evictable reports whether c has anything on the device to move out.
func evictable(c *chunk) bool {
	return c.payload.on == Device || c.grad.on == Device || c.shard.on == Device
}

// evict moves c's device-resident parameter data to host memory. A
// sharded chunk with every tensor HOLD drops its payload instead.
func (g *Gemini) evict(c *chunk) {
	if c.payload.on != Device && c.grad.on != Device && c.shard.on != Device {
		return // nothing of c on the device: no eviction (the conservative path asks for every chunk)
	}
	defer g.timeEviction(time.Now())
	if c.payload.on == Device {
		if c.sharded && c.allIn(Hold) {
			g.afterUse(c)
		} else {
			g.moveSlot(c, PartPayload, &c.payload, Host)
		}
	}
	g.moveSlot(c, PartGrad, &c.grad, Host)
	g.moveSlot(c, PartShard, &c.shard, Host)
}

// farthest is the evictable chunk outside keep whose next use after hook k
// comes last (nil when none is left).
func (g *Gemini) farthest(k int, keep []*chunk) *chunk {
	var best *chunk
	bestUse := -1
	for _, c := range g.chunks {
		if !evictable(c) || contains(keep, c) {
			continue
		}
		if u := g.nextUse(c, k); u > bestUse {
			best, bestUse = c, u
		}
	}
	return best
}

// nextUse is the hook index of c's first use after hook k, counting on
// into the next step; math.MaxInt when c is never used.
func (g *Gemini) nextUse(c *chunk, k int) int {
	if len(c.uses) == 0 {
		return math.MaxInt
	}
	i := sort.SearchInts(c.uses, k+1)
	if i < len(c.uses) {
		return c.uses[i]
	}
	return c.uses[0] + len(g.tr.ops)
}

func contains(cs []*chunk, c *chunk) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}
