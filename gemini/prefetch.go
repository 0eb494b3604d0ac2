package gemini

import "strings"

// Prefetch. After warm-up the traced order of chunk use says which chunks
// the next operators need. At every hook, once the operator's own chunks
// are resident, the next MaxPrefetch distinct chunks of that order are
// uploaded ahead, nearest use first, through the mover (on a GPU a copy
// stream, so the upload overlaps the operators in between; the first
// operator that uses the chunk waits for it on the device).
//
// The budget is never exceeded: an upload is issued only when its bytes,
// the bytes in use (offloads in flight included) and the largest traced
// growth of the operators until its use fit. To make room, prefetching
// evicts only chunks outside the window whose next use comes after the
// prefetched chunk's (Belady: they would have gone first anyway), and it
// never waits for those offloads: it uploads at a later hook, once they
// have completed. When the nearest chunk does not fit, none farther is
// tried (it would take the room the nearer one needs). A window chunk
// whose offload is still in flight is taken back instead (revive).

// partSlot is one part of a chunk to upload.
type partSlot struct {
	part Part
	s    *slot
}

// upcoming is one chunk of the prefetch window and its next use.
type upcoming struct {
	c   *chunk
	use int
}

// window lists the next MaxPrefetch distinct chunks used after hook k in
// the traced order, nearest first (none when prefetch is off or the step
// is not planned).
func (g *Gemini) window(k int) []upcoming {
	if g.cfg.MaxPrefetch == 0 || g.offTrace || !g.planned(k) {
		return nil
	}
	var out []upcoming
	for j := k + 1; j < len(g.tr.ops) && len(out) < g.cfg.MaxPrefetch; j++ {
		for _, c := range g.tr.users[j] {
			if len(out) < g.cfg.MaxPrefetch && !inWindow(out, c) {
				out = append(out, upcoming{c, j})
			}
		}
	}
	return out
}

func inWindow(w []upcoming, c *chunk) bool {
	for _, u := range w {
		if u.c == c {
			return true
		}
	}
	return false
}

// prefetch uploads ahead at hook k; keep are the operator's own chunks.
func (g *Gemini) prefetch(k int, keep []*chunk) {
	w := g.window(k)
	protect := append([]*chunk(nil), keep...) // evicting a window chunk for another is circular
	for _, u := range w {
		protect = append(protect, u.c)
	}
	for _, u := range w {
		parts := g.reviveAll(g.uploadsFor(u.c, u.use))
		if len(parts) == 0 {
			continue
		}
		if !g.roomFor(k, u.use, partBytes(parts), protect) {
			return
		}
		for _, p := range parts {
			g.startMove(u.c, p.part, p.s, Device, true)
		}
	}
}

// uploadsFor lists what chunk c needs on the device for its use at hook
// j: its payload (replicated chunks), its shard (sharded chunks homed on
// the device, so the all-gather reads it there) and in backward its
// gradient buffer, where they are in host memory.
func (g *Gemini) uploadsFor(c *chunk, j int) []partSlot {
	var out []partSlot
	add := func(p Part, s *slot) {
		if s.on == Host {
			out = append(out, partSlot{p, s})
		}
	}
	if !c.sharded {
		add(PartPayload, &c.payload)
	}
	if c.sharded && c.home == Device && c.payload.on == Nowhere {
		add(PartShard, &c.shard)
	}
	if strings.HasPrefix(g.tr.ops[j], "pre-bwd") {
		add(PartGrad, &c.grad)
	}
	return out
}

// reviveAll takes back the parts whose offload is still in flight (free:
// their device copy is still there) and returns the rest.
func (g *Gemini) reviveAll(ps []partSlot) []partSlot {
	rest := ps[:0]
	for _, p := range ps {
		if p.s.pend != nil && p.s.pend.src != nil && !p.s.pend.mv.Done() {
			g.revive(p.s)
			continue
		}
		rest = append(rest, p)
	}
	return rest
}

func partBytes(ps []partSlot) int64 {
	var n int64
	for _, p := range ps {
		n += p.s.t.Bytes()
	}
	return n
}

// roomFor reports whether bytes more fit for a chunk used at hook j, from
// hook k until then: with the bytes in use now and the largest traced
// growth of the segments in between, as makeRoom will demand at each of
// them (an upload that fits now but not two operators later would be
// evicted again unused). It evicts (without waiting) chunks outside
// protect used after j.
func (g *Gemini) roomFor(k, j int, bytes int64, protect []*chunk) bool {
	b := g.cfg.DeviceBudget
	if b == 0 {
		return true
	}
	var growth int64
	for i := k; i < j; i++ {
		growth = max(growth, g.tr.growth[i])
	}
	nonModel := g.nonModelNow() + growth
	need := func() int64 { return g.managedDev + bytes + nonModel }
	for need()-g.freeing > b {
		v := g.farthest(k, protect)
		if v == nil || g.nextUse(v, k) <= j {
			return false
		}
		g.evict(v)
	}
	g.poll() // offloads already complete (always, on a synchronous mover) free their bytes now
	return need() <= b
}
