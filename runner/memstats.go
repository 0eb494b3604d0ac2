package runner

import (
	"resnetlab/gemini"
	"resnetlab/kernels"
	"resnetlab/report"
	"resnetlab/spec"
)

// Host memory and Gemini statistics for the memory and chunk panes and
// the results file. Host bytes are read from what really holds them: the
// Gemini host tier's allocator (a CPU backend), the host staging of
// comm = "host" on GPUs, and the rank's host batch buffers. On the CPU
// backend the device itself is host memory: MemoryUsage.DeviceIsHost says
// so, and the results' peak host bytes add the backend's peak.

// geminiRank is one rank's running Gemini statistics, written by that
// rank's goroutine inside Step and read by the job between steps.
type geminiRank struct {
	midIdx int // mid-step snapshots seen so far in the current step
	midN   int // mid-step snapshots the last finished step had
	total  report.GeminiMemStats
	last   gemRecord // the last step's statistics, for the report to rank 0
	// For the report to rank 0 as well: the moves and the latest chunk
	// snapshot forwarded since the run started (what this rank's own
	// events showed), and the chunk layout of the engine's first snapshot,
	// against which rank 0 checks the other ranks' chunks.
	moves  ChunkMoves
	snap   ChunksUpdate
	layout []ChunkState
}

// localGem is world rank r's statistics when this process trains it.
func (j *job) localGem(r int) *geminiRank {
	first := 0
	if j.pool != nil {
		first = j.pool.first
	}
	if i := r - first; i >= 0 && i < len(j.gem) {
		return &j.gem[i]
	}
	return nil
}

// countMove adds one move to rank r's totals, as the TUI counts ChunkMoved.
func (j *job) countMove(r int, e ChunkMoved) {
	g := j.localGem(r)
	if g == nil {
		return
	}
	g.moves.add(e)
}

// add counts one move into m.
func (m *ChunkMoves) add(e ChunkMoved) {
	switch {
	case e.ToDevice:
		m.ToDevice++
		m.H2DBytes += e.Bytes
		if e.Eval {
			m.EvalH2D += e.Bytes
		}
	case e.Clean:
		m.Clean++
	default:
		m.ToHost++
		m.D2HBytes += e.Bytes
		if e.Eval {
			m.EvalD2H += e.Bytes
		}
	}
	if e.Prefetch {
		m.Prefetched++
	}
}

// restartChunks forgets the moves and snapshots from before RunStarted:
// the TUI clears its strip there, and rank 0's copy must match.
func (j *job) restartChunks() {
	for i := range j.gem {
		j.gem[i].moves, j.gem[i].snap = ChunkMoves{}, ChunksUpdate{}
	}
}

// hostHolder is a communicator that keeps host staging buffers.
type hostHolder interface{ HostBytes() int64 }

// pinnedHolder is a backend that holds page-locked host memory (the CUDA
// backend's copy staging and the pinned memory it lends Gemini).
type pinnedHolder interface{ PinnedBytes() int64 }

// hostMemory is rank i's host bytes outside its compute backend: the
// Gemini host tier per category, pageable buffers (batches, comm staging,
// the host tier where it is not pinned) and the pinned memory of the
// backend (which holds a pinned host tier).
func (j *job) hostMemory(rs *rankState) (cats [kernels.NumCategories]int64, pageable, pinned, peak int64) {
	pageable = 4 * int64(cap(rs.xh)+cap(rs.yh))
	if h, ok := rs.comm.(hostHolder); ok {
		pageable += h.HostBytes()
	}
	if p, ok := rs.be.(pinnedHolder); ok {
		pinned = p.PinnedBytes()
	}
	peak = pageable + pinned
	if g, ok := rs.eng.(*gemini.Gemini); ok {
		hs := g.HostMemStats()
		cats = hs.InUse
		tierPinned := g.HostPinnedBytes()
		// The tier's peak stands for its current bytes, pinned or not.
		peak += hs.TotalPeak - tierPinned
		pageable += hs.Total() - tierPinned
	}
	return cats, pageable, pinned, peak
}

// geminiMem records one rank's step statistics and forwards them.
func (j *job) geminiMem(ev gemini.MemStatsEvent) {
	if i := ev.Rank - j.pool.first; i >= 0 && i < len(j.gem) {
		j.gem[i].last = gemRecord{Step: int64(ev.Step), H2D: ev.H2DBytes, D2H: ev.D2HBytes, Evictions: int64(ev.Evictions),
			EvictNanos: int64(ev.EvictTime), PeakDevice: ev.PeakDevice, HostIn: ev.HostInUse, HostPeak: ev.HostPeak,
			NonModelPeak: ev.NonModelPeak, WastePct: ev.WastePct}
		t := &j.gem[i].total
		t.Steps++
		t.H2DBytes += ev.H2DBytes
		t.D2HBytes += ev.D2HBytes
		t.Evictions += ev.Evictions
		t.EvictSeconds += ev.EvictTime.Seconds()
		t.PeakDeviceBytes = max(t.PeakDeviceBytes, ev.PeakDevice)
		t.PeakHostTierBytes = max(t.PeakHostTierBytes, ev.HostPeak)
		t.NonModelPeakBytes = ev.NonModelPeak
		t.ChunkWastePct = ev.WastePct
	}
	j.emit(GeminiStep{Run: j.info.ID, Rank: ev.Rank, Step: ev.Step, H2DBytes: ev.H2DBytes, D2HBytes: ev.D2HBytes,
		Evictions: ev.Evictions, EvictTime: ev.EvictTime, PeakDevice: ev.PeakDevice, HostInUse: ev.HostInUse,
		HostPeak: ev.HostPeak, NonModelPeak: ev.NonModelPeak, WastePct: ev.WastePct})
}

// geminiChunks forwards a chunk snapshot. Gemini takes one mid-step
// snapshot each time a tensor state first appears in a step (COMPUTE,
// HOLD_AFTER_BWD, READY_FOR_REDUCE...); the front ends get one of them per
// step, the next one in turn (step s: the (s mod n)-th), so a fast step
// floods nobody and the strip still shows every phase. Resting snapshots
// always go.
func (j *job) geminiChunks(ev gemini.ChunksEvent) {
	if i := ev.Rank - j.pool.first; i >= 0 && i < len(j.gem) {
		g := &j.gem[i]
		if ev.Op == "" {
			g.midN, g.midIdx = g.midIdx, 0
		} else {
			g.midIdx++
			if g.midIdx-1 != ev.Step%max(g.midN, 1) {
				return
			}
		}
	} else if ev.Op != "" {
		return
	}
	u := ChunksUpdate{Run: j.info.ID, Rank: ev.Rank, Step: ev.Step, Op: ev.Op}
	for _, c := range ev.Chunks {
		u.Chunks = append(u.Chunks, ChunkState{ID: c.ID, OnDevice: c.OnDevice(), States: c.States, Bytes: c.Bytes,
			Params: c.ParamsOn().String(), Optim: c.Optim.String()})
	}
	if g := j.localGem(ev.Rank); g != nil {
		g.snap = u
		if g.layout == nil && ev.Op == "" {
			g.layout = u.Chunks
		}
	}
	j.emit(u)
}

// geminiResult fills the result's Gemini statistics of every rank: this
// process's ranks from their engines, on rank 0 of a world the other
// processes' from their reports (totals only: no per-operator peaks, no
// chunk list).
func (j *job) geminiResult() {
	if j.cell.Plugin != spec.PluginGemini || !j.records() {
		return
	}
	if j.result.Gemini == nil {
		j.result.Gemini = make([]report.GeminiMemStats, j.cell.WorldSize)
	}
	for r := range j.result.Gemini {
		if t, ok := j.remoteGemini(r); ok {
			j.result.Gemini[r] = t
		}
	}
	for i, rs := range j.ranks {
		g, ok := rs.eng.(*gemini.Gemini)
		if !ok || i >= len(j.gem) {
			continue
		}
		t := j.gem[i].total
		t.Rank = j.globalRank(i)
		t.EvalH2DBytes, t.EvalD2HBytes = j.gem[i].moves.EvalH2D, j.gem[i].moves.EvalD2H
		for _, op := range g.NonModelPerOp() {
			t.NonModelPerOp = append(t.NonModelPerOp, report.OpBytes{Op: op.Op, Bytes: op.Bytes})
		}
		for _, c := range g.Chunks() {
			t.Chunks = append(t.Chunks, report.ChunkPlace{ID: c.ID, Bytes: c.Bytes, Params: c.ParamsOn().String(), Optim: c.Optim.String()})
		}
		j.result.Gemini[t.Rank] = t
	}
}
