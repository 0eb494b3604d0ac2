package gemini

import (
	"testing"
)

// A budgeted two-rank run: its memory statistics are real (host bytes
// held, traffic both ways matching the move events, the device peak within
// the budget), and the mid-step snapshots show the in-step states.
func TestMemStatsOfBudgetedRun(t *testing.T) {
	base := runGemini(t, budgetBase(2, Auto))
	budget := base[0].peak / 2
	got := runGemini(t, withBudget(budgetBase(2, Auto), budget, 2))
	for r, res := range got {
		if len(res.mems) != 3 {
			t.Fatalf("rank %d: %d memstats events, want one per step (3)", r, len(res.mems))
		}
		var h2d, d2h int64
		for _, mv := range res.moves[:res.inStep] {
			if mv.To == Device {
				h2d += mv.Bytes
			} else {
				d2h += mv.Bytes
			}
		}
		var sh2d, sd2h int64
		for _, m := range res.mems {
			sh2d += m.H2DBytes
			sd2h += m.D2HBytes
			if m.PeakDevice > budget {
				t.Errorf("rank %d step %d: device peak %d B over the budget %d B", r, m.Step, m.PeakDevice, budget)
			}
		}
		// New's placement moves nothing; every move is inside a step.
		if sh2d != h2d || sd2h != d2h || h2d == 0 || d2h == 0 {
			t.Errorf("rank %d: memstats say h2d %d d2h %d B, the move events %d and %d B", r, sh2d, sd2h, h2d, d2h)
		}
		last := res.mems[len(res.mems)-1]
		if last.HostInUse <= 0 || last.HostPeak < last.HostInUse || res.hostAt.Total() != last.HostInUse {
			t.Errorf("rank %d: host bytes %d (peak %d), host backend says %d", r, last.HostInUse, last.HostPeak, res.hostAt.Total())
		}
		if last.NonModelPeak != res.stats.NonModelPeak || last.NonModelPeak <= 0 {
			t.Errorf("rank %d: non-model peak %d, stats %d", r, last.NonModelPeak, res.stats.NonModelPeak)
		}
		if last.WastePct < 0 || last.WastePct >= 100 {
			t.Errorf("rank %d: waste %.2f%%", r, last.WastePct)
		}
		var onHost bool
		for _, c := range res.chunks {
			onHost = onHost || c.ParamsOn() == Host || c.Optim == Host
		}
		if !onHost {
			t.Errorf("rank %d: a half budget left no chunk part in host memory: %+v", r, res.chunks)
		}
	}
}

// One step's state changes, per tensor, follow the legal transitions in
// order and together visit every state; the snapshots taken during the
// step show COMPUTE, HOLD_AFTER_BWD and READY_FOR_REDUCE, a bounded number
// of times.
func TestStepStatesCoverLifeCycle(t *testing.T) {
	spec := budgetBase(2, Auto)
	spec.steps = 2
	res := runGemini(t, spec)
	for r, rr := range res {
		if rr.badSC != "" {
			t.Fatalf("rank %d: illegal or out-of-order state change %s", r, rr.badSC)
		}
		var seen [numStates]bool
		for _, sc := range rr.trace {
			seen[sc.From], seen[sc.To] = true, true
		}
		for s, ok := range seen {
			if !ok {
				t.Errorf("rank %d: no tensor was ever %s", r, TensorState(s))
			}
		}
		var shown [numStates]bool
		for _, e := range rr.snaps {
			for _, c := range e.Chunks {
				for s, n := range c.States {
					shown[s] = shown[s] || n > 0
				}
			}
		}
		for _, s := range []TensorState{Compute, HoldAfterBwd, ReadyForReduce, Hold, Free} {
			if !shown[s] {
				t.Errorf("rank %d: no mid-step snapshot shows %s", r, s)
			}
		}
		if n := len(rr.snaps); n > int(numStates)*spec.steps {
			t.Errorf("rank %d: %d snapshots in %d steps, want at most one per state per step", r, n, spec.steps)
		}
	}
}
