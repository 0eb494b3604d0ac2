package runner

import (
	"fmt"

	"resnetlab/comm"
	"resnetlab/device"
	"resnetlab/engine"
	"resnetlab/gemini"
	"resnetlab/kernels"
	"resnetlab/model"
	"resnetlab/spec"
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
		mv := ChunkMoved{Run: j.info.ID, Rank: ev.Rank, Chunk: ev.Chunk, ToDevice: ev.To == gemini.Device, Bytes: ev.Bytes,
			Prefetch: ev.Prefetch, Clean: ev.Clean, Eval: !ev.InStep}
		j.countMove(ev.Rank, mv)
		j.emit(mv)
	case gemini.ChunksEvent:
		j.geminiChunks(ev)
	case gemini.MemStatsEvent:
		j.geminiMem(ev)
	}
}

// geminiSummary logs this process's first rank's chunk traffic at the end
// of a Gemini run: what a budget costs, and how much prefetch hid. The
// moves are the run's since it started, as the TUI counts them, split as
// the results record them: in the training steps (h2d_bytes, d2h_bytes)
// and by the evaluations (eval_h2d_bytes, eval_d2h_bytes).
func (j *job) geminiSummary(eng engine.Trainer) {
	g, ok := eng.(*gemini.Gemini)
	if !ok || len(j.gem) == 0 {
		return
	}
	st, m := g.Stats(), j.gem[0].moves
	j.logf(LevelInfo, "gemini rank %d: %s", j.globalRank(0), movesSummary(m, j.gem[0].total.Steps))
	j.logf(LevelInfo, "gemini rank %d: %d prefetched, %d stalls (moves still in flight when needed), %d offloads taken back",
		j.globalRank(0), st.Prefetches, st.Stalls, st.Revived)
}

// movesSummary says what m moved, and how much of it in the training steps
// and by the evaluations, in the results' words.
func movesSummary(m ChunkMoves, steps int) string {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	all, eval := m.H2DBytes+m.D2HBytes, m.EvalH2D+m.EvalD2H
	return fmt.Sprintf("%d chunk moves, %s (%s to the device, %s to the host; %d clean drops moved nothing): "+
		"%s in the %d training steps (the results' h2d_bytes %s + d2h_bytes %s), "+
		"%s by the evaluations (eval_h2d_bytes %s + eval_d2h_bytes %s)",
		m.ToDevice+m.ToHost, mib(all), mib(m.H2DBytes), mib(m.D2HBytes), m.Clean,
		mib(all-eval), steps, mib(m.H2DBytes-m.EvalH2D), mib(m.D2HBytes-m.EvalD2H),
		mib(eval), mib(m.EvalH2D), mib(m.EvalD2H))
}

// budgetError says in the spec's words that [gemini] device_budget is too
// small, and what would do: gemini knows the budget only as bytes. The
// rank is added by the rank pool.
func (j *job) budgetError(e *gemini.BudgetError) error {
	given := fmt.Sprintf("%s: [gemini] device_budget = %q (%d B)", j.spec.File, spec.FormatSize(e.Budget), e.Budget)
	if m := e.MinBudget(); m > 0 {
		return fmt.Errorf("%s is too small: the warm-up step peaked at %s (%d B) with only each operator's chunks on the device "+
			"(activations and one operator's chunks must fit at once); want device_budget >= %d B, e.g. device_budget = %q",
			given, spec.FormatSize(e.Peak), e.Peak, m, roundUpSize(m))
	}
	return fmt.Errorf("%s was exceeded in step %d: the device peaked at %s (%d B) (%s); want a larger device_budget "+
		"(past the warm-up no minimum is known)", given, e.Step, spec.FormatSize(e.Peak), e.Peak, e.Note)
}

// roundUpSize is n rounded up to a whole MiB (KiB below 1 MiB), as a
// device_budget the spec parses.
func roundUpSize(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%dKiB", (n+1<<10-1)>>10)
	}
	return fmt.Sprintf("%dMiB", (n+1<<20-1)>>20)
}
