package gemini

import (
	"time"

	"resnetlab/model"
)

// Memory statistics in the manner of ColossalAI's Gemini memstats: per
// step, the bytes moved each way, the time spent evicting, the device and
// host peaks; once traced, the non-model peak of every operator; and the
// chunks' padding. Snapshots of the chunk states are taken during the
// step too, so a front end sees COMPUTE, HOLD_AFTER_BWD and
// READY_FOR_REDUCE and not only the resting HOLD/FREE.

// MemStatsEvent is one rank's memory statistics of one Step, sent at its end.
type MemStatsEvent struct {
	Rank, Step int
	H2DBytes   int64         // host -> device bytes issued this step (chunk parts)
	D2HBytes   int64         // device -> host bytes issued this step
	Evictions  int           // chunks evicted to make room
	EvictTime  time.Duration // host time spent evicting (issuing the moves, waiting for slots)
	// HostAdam is the host time of HybridAdam's host half (the host
	// chunks' update and the issue of their write-back).
	HostAdam time.Duration
	// OffloadWait is the host time blocked on offloads still in flight
	// (chunk parts and gradient shards) when their data or device memory
	// was needed.
	OffloadWait time.Duration
	PeakDevice  int64 // device peak of the step
	HostInUse   int64 // host tier bytes at the step's end
	HostPeak    int64 // host tier peak so far
	// NonModelPeak is the largest traced non-model bytes of any operator
	// (0 until the warm-up trace is done).
	NonModelPeak int64
	WastePct     float64 // chunk padding: 100 * unused / capacity elements
}

// OpPeak is one traced operator's non-model peak.
type OpPeak struct {
	Op    string // hook name, e.g. "pre-fwd layer1.0.conv1"
	Bytes int64
}

// memStep is the running step's counters.
type memStep struct {
	h2d, d2h  int64
	evictions int
	evict     time.Duration
	hostAdam  time.Duration
	wait      time.Duration
	seen      uint8 // bit s: a snapshot this step already showed state s
}

func (g *Gemini) beginMemStats() { g.ms = memStep{} }

// emit sends e to the OnEvent callback and counts move traffic: a move
// inside Step in the step's statistics (outside, the next step's begin
// drops it from them; MoveEvent.InStep says which).
func (g *Gemini) emit(e any) {
	if mv, ok := e.(MoveEvent); ok {
		mv.InStep = g.training
		e = mv
		switch mv.To {
		case Device:
			g.ms.h2d += mv.Bytes
		case Host:
			g.ms.d2h += mv.Bytes
		}
	}
	if g.cfg.OnEvent != nil {
		g.cfg.OnEvent(e)
	}
}

// timeEviction adds the time since t0 to the step's eviction time (deferred
// by evict).
func (g *Gemini) timeEviction(t0 time.Time) {
	g.ms.evictions++
	g.ms.evict += time.Since(t0)
}

// MemStats is the running or last step's statistics.
func (g *Gemini) MemStats() MemStatsEvent {
	hs := g.host.MemStats()
	return MemStatsEvent{Rank: g.rank, Step: g.calls, H2DBytes: g.ms.h2d, D2HBytes: g.ms.d2h,
		Evictions: g.ms.evictions, EvictTime: g.ms.evict, HostAdam: g.ms.hostAdam, OffloadWait: g.ms.wait, PeakDevice: g.stepPeak,
		HostInUse: hs.Total(), HostPeak: hs.TotalPeak, NonModelPeak: g.tr.nonModel, WastePct: g.WastePct()}
}

func (g *Gemini) emitMemStats() {
	if g.cfg.OnEvent != nil {
		g.cfg.OnEvent(g.MemStats())
	}
}

// WastePct is the chunks' padding in percent of their capacity.
func (g *Gemini) WastePct() float64 {
	var size, used int
	for _, c := range g.chunks {
		size += c.size
		used += c.used
	}
	if size == 0 {
		return 0
	}
	return 100 * float64(size-used) / float64(size)
}

// NonModelPerOp is the traced non-model peak of every operator, in hook
// order (nil before the warm-up trace is done).
func (g *Gemini) NonModelPerOp() []OpPeak {
	if !g.tr.done {
		return nil
	}
	out := make([]OpPeak, len(g.tr.ops))
	for k, op := range g.tr.ops {
		out[k] = OpPeak{Op: op, Bytes: g.tr.opPeak[k]}
	}
	return out
}

// snapshot sends a mid-step ChunksEvent after hook k when some chunk has
// a tensor in a state no snapshot of this step has shown yet: at most one
// per state per step (a handful), so it costs nothing beside the step.
func (g *Gemini) snapshot(k int, m model.Module, pre, bwd bool) {
	if g.cfg.OnEvent == nil || !g.training {
		return
	}
	var now uint8
	for _, t := range g.tensors {
		now |= 1 << t.state
	}
	if now&^g.ms.seen == 0 {
		return
	}
	g.ms.seen |= now
	g.cfg.OnEvent(ChunksEvent{Rank: g.rank, Step: g.calls, Chunks: g.Chunks(), Op: opName(m, pre, bwd), Hook: k})
}
