package gemini

import (
	"fmt"
	"testing"

	"resnetlab/kernels"
)

// lagMover is a device whose copies take time, for the CPU tests: a move
// completes only once lag more compute operations (convolutions, batch
// norms, linear layers) have been issued after it, or when it is awaited
// or finished before that, which is a stall. Copies complete in issue
// order, like one copy stream. The data lands only when a move completes,
// so a kernel that reads an upload's destination before Await, or a host
// copy read before Finish, computes wrong numbers; freeing a tensor a move
// still uses is recorded as an error.
type lagMover struct {
	kernels.Backend
	lag    int
	clock  int
	flight []*lagMove
	stalls int
	moves  int
	err    error
}

type lagMove struct {
	due  int
	done bool
	land func()          // writes the data into the destination
	uses *kernels.Tensor // the device tensor the copy reads or writes
}

func (m *lagMove) Done() bool { return m.done }

var _ kernels.AsyncMover = (*lagMover)(nil)

func (l *lagMover) UploadAsync(dst *kernels.Tensor, src []float32) kernels.Move {
	vals := append([]float32(nil), src...) // src may be reused on return
	return l.issue(&lagMove{land: func() { l.Backend.Upload(dst, vals) }, uses: dst})
}

func (l *lagMover) DownloadAsync(src *kernels.Tensor, dst []float32) kernels.Move {
	vals := make([]float32, src.Len()) // the values after the compute issued so far
	l.Backend.Download(src, vals)
	return l.issue(&lagMove{land: func() { copy(dst, vals) }, uses: src})
}

func (l *lagMover) issue(m *lagMove) kernels.Move {
	m.due = l.clock + l.lag
	l.flight = append(l.flight, m)
	l.moves++
	return m
}

// Await and Finish both wait for m here: the CPU has no second stream.
func (l *lagMover) Await(m kernels.Move)  { l.wait(m.(*lagMove)) }
func (l *lagMover) Finish(m kernels.Move) { l.wait(m.(*lagMove)) }

func (l *lagMover) wait(m *lagMove) {
	if m.done {
		return
	}
	l.stalls++
	for !m.done { // in order, like a stream
		l.land()
	}
}

func (l *lagMover) land() {
	m := l.flight[0]
	l.flight = l.flight[1:]
	m.land()
	m.done = true
}

// tick is one compute operation: the moves that are due complete first.
func (l *lagMover) tick() {
	l.clock++
	for len(l.flight) > 0 && l.flight[0].due <= l.clock {
		l.land()
	}
}

func (l *lagMover) Free(t *kernels.Tensor) {
	for _, m := range l.flight {
		if m.uses == t && l.err == nil {
			l.err = fmt.Errorf("freed %v while a move in flight still uses it", t)
		}
	}
	l.Backend.Free(t)
}

func (l *lagMover) Conv2dForward(y, x, w *kernels.Tensor, p kernels.ConvParams) {
	l.tick()
	l.Backend.Conv2dForward(y, x, w, p)
}

func (l *lagMover) Conv2dBackward(dx, dw, dy, x, w *kernels.Tensor, p kernels.ConvParams) {
	l.tick()
	l.Backend.Conv2dBackward(dx, dw, dy, x, w, p)
}

func (l *lagMover) BatchNormForward(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd *kernels.Tensor, training bool, momentum, eps float32) {
	l.tick()
	l.Backend.BatchNormForward(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, training, momentum, eps)
}

func (l *lagMover) BatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd *kernels.Tensor) {
	l.tick()
	l.Backend.BatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd)
}

func (l *lagMover) LinearForward(y, x, w, b *kernels.Tensor) {
	l.tick()
	l.Backend.LinearForward(y, x, w, b)
}

func (l *lagMover) LinearBackward(dx, dw, db, dy, x, w *kernels.Tensor) {
	l.tick()
	l.Backend.LinearBackward(dx, dw, db, dy, x, w)
}

// TestPrefetch trains 3 steps under budgets (and, unbudgeted, with half
// the parameters homed in host memory) with moves that take time, without
// and with prefetch: both must compute exactly what the unbudgeted run
// computes, keep the budget, keep every tensor's life cycle legal; with
// prefetch the planned steps (after the warm-up) must stall less and move
// no more.
func TestPrefetch(t *testing.T) {
	for _, world := range []int{1, 2} {
		base := runGemini(t, budgetBase(world, Auto))
		full := base[0].peak
		cases := []struct {
			name string
			spec runSpec
		}{
			{"auto 1/2", withBudget(budgetBase(world, Auto), full/2, 2)},
			{"auto 1/4", withBudget(budgetBase(world, Auto), full/4, 4)},
			{"static 1/2", withBudget(budgetBase(world, Static), full/2, 2)},
		}
		if world == 1 { // too tight for two ranks' shards; host-homed shards are not moved
			cases = append(cases, struct {
				name string
				spec runSpec
			}{"auto 1/6", withBudget(budgetBase(world, Auto), full/6, 4)})
			s := budgetBase(world, Static)
			s.gem.OffloadParamFrac = 0.5
			cases = append(cases, struct {
				name string
				spec runSpec
			}{"static host params", s})
		}
		for _, tc := range cases {
			name := fmt.Sprintf("world %d %s", world, tc.name)
			tc.spec.lag = 3
			off := runGemini(t, tc.spec)
			tc.spec.gem.MaxPrefetch = 4
			on := runGemini(t, tc.spec)
			for r := range on {
				checkPrefetchRun(t, fmt.Sprintf("%s rank %d off", name, r), tc.spec.gem.DeviceBudget, off[r], base[r], false)
				checkPrefetchRun(t, fmt.Sprintf("%s rank %d on", name, r), tc.spec.gem.DeviceBudget, on[r], base[r], true)
				if d := stateDiff(off[r].state, on[r].state); d != "" {
					t.Errorf("%s rank %d: prefetch changes the result: %s", name, r, d)
				}
			}
			a, b := planned(off[0]), planned(on[0])
			t.Logf("%s: planned steps: stalls %d -> %d, moves %d -> %d (%d prefetched); peak %d -> %d B of %d; revived %d, %d; grad offloads %d",
				name, a.Stalls, b.Stalls, a.Moves, b.Moves, b.Prefetches, off[0].peak, on[0].peak, tc.spec.gem.DeviceBudget,
				off[0].stats.Revived, on[0].stats.Revived, on[0].stats.GradOffloads)
			if a.Moves == 0 || b.Stalls >= a.Stalls || b.Moves > a.Moves {
				t.Errorf("%s: planned steps: %d stalls and %d moves with prefetch, %d and %d without: want fewer stalls, no more moves",
					name, b.Stalls, b.Moves, a.Stalls, a.Moves)
			}
		}
	}
}

// planned is what the steps after the warm-up step added to the counters.
func planned(r rankResult) Stats {
	a, b := r.steps[0], r.steps[len(r.steps)-1]
	return Stats{Moves: b.Moves - a.Moves, Stalls: b.Stalls - a.Stalls, Prefetches: b.Prefetches - a.Prefetches}
}

func checkPrefetchRun(t *testing.T, name string, budget int64, got, base rankResult, prefetch bool) {
	t.Helper()
	if budget > 0 {
		checkBudgetRun(t, name, budget, got, base)
	} else if d := stateDiff(base.state, got.state); d != "" {
		t.Errorf("%s: differs from the unbudgeted run: %s", name, d)
	}
	if got.badSC != "" {
		t.Errorf("%s: illegal state change %s", name, got.badSC)
	}
	if got.lag.err != nil {
		t.Errorf("%s: %v", name, got.lag.err)
	}
	st := got.stats
	marked, optim := 0, 0
	for _, mv := range got.moves {
		if mv.Part == PartOptim {
			optim++ // placement after warm-up: synchronous, not through the mover
		}
		if mv.Prefetch {
			marked++
			if mv.To != Device {
				t.Errorf("%s: prefetch event %+v does not go to the device", name, mv)
			}
		}
	}
	if got.lagged != [2]int{st.Moves - optim + st.GradOffloads + st.WriteBacks, st.Stalls} {
		t.Errorf("%s: the mover saw %d moves and %d stalls; Stats say %d chunk moves, %d gradient offloads, %d write-backs and %d stalls",
			name, got.lagged[0], got.lagged[1], st.Moves-optim, st.GradOffloads, st.WriteBacks, st.Stalls)
	}
	if marked != st.Prefetches || (st.Prefetches > 0) != prefetch {
		t.Errorf("%s: %d prefetch events, %d prefetches in Stats, prefetch on: %v", name, marked, st.Prefetches, prefetch)
	}
}
