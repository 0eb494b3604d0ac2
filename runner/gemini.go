package runner

import (
	"resnetlab/comm"
	"resnetlab/device"
	"resnetlab/engine"
	"resnetlab/gemini"
	"resnetlab/kernels"
	"resnetlab/model"
)

// newGemini builds rank r's Gemini engine from the spec's [gemini] table
// and forwards its chunk events to the run's event stream.
func (j *job) newGemini(r int, be kernels.Backend, dc comm.DeviceCommunicator, m *model.ResNet, sc engine.ScalerConfig) (engine.Trainer, error) {
	gs := j.spec.Gemini
	return gemini.New(be, device.Host(), dc, m, gemini.Config{Precision: j.precision, Scaler: sc,
		Placement: gs.Placement, DeviceBudget: gs.DeviceBudget, ChunkElems: int(gs.ChunkSize / int64(j.precision.Size())),
		ShardParamFrac: gs.ShardParamFrac, OffloadOptimFrac: gs.OffloadOptimFrac, OffloadParamFrac: gs.OffloadParamFrac,
		GPUMarginMemRatio: gs.GPUMarginMemRatio, MaxPrefetch: gs.MaxPrefetch, OnEvent: func(e any) { j.geminiEvent(e) }})
}

// geminiEvent converts memory events; per-tensor state changes are
// summarised by the chunk updates and dropped.
func (j *job) geminiEvent(e any) {
	switch ev := e.(type) {
	case gemini.MoveEvent:
		mv := ChunkMoved{Run: j.info.ID, Rank: ev.Rank, Chunk: ev.Chunk, ToDevice: ev.To == gemini.Device, Bytes: ev.Bytes, Prefetch: ev.Prefetch, Clean: ev.Clean}
		j.countMove(ev.Rank, mv)
		j.emit(mv)
	case gemini.ChunksEvent:
		j.geminiChunks(ev)
	case gemini.MemStatsEvent:
		j.geminiMem(ev)
	}
}

// geminiSummary logs rank 0's chunk traffic at the end of a Gemini run:
// what a budget costs, and how much prefetch hid.
func (j *job) geminiSummary(eng engine.Trainer) {
	g, ok := eng.(*gemini.Gemini)
	if !ok {
		return
	}
	st := g.Stats()
	j.logf(LevelInfo, "gemini rank 0: %d chunk moves (%.1f MiB), %d prefetched, %d stalls (moves still in flight when needed), %d offloads taken back",
		st.Moves, float64(st.BytesMoved)/(1<<20), st.Prefetches, st.Stalls, st.Revived)
}
