package gemini

import "fmt"

// tracer is the warm-up memory tracer. Every hook call of a training step
// is an operator boundary; the segment after hook k (the module's kernel
// after a pre-hook, the unparametrised layers and the loss after a
// post-hook) allocates non-model data: activations and workspace. During
// the warm-up steps the device peak is reset at every hook, so the peak
// read at hook k+1 is the segment's own. After warm-up the recorded growth
// says how much room to leave before each operator.
type tracer struct {
	done     bool
	ops      []string   // operator name per hook index (checks later steps match)
	growth   []int64    // per hook index: peak bytes the segment adds to the device total
	endTotal []int64    // device total when hook k finished (tracing scratch)
	endModel []int64    // managed device bytes when hook k finished
	users    [][]*chunk // per hook index: the chunks a pre-hook made resident (nil for post-hooks)
	nonModel int64      // largest non-model bytes at any traced peak
	opPeak   []int64    // per hook index: non-model bytes at the segment's traced peak
}

// tracing reports whether the running step records statistics.
func (g *Gemini) tracing() bool { return g.training && !g.tr.done }

// planned reports whether hook k may use the statistics: after warm-up and
// inside a training step whose operators so far match the traced ones.
func (g *Gemini) planned(k int) bool {
	return g.training && g.tr.done && k >= 0 && k < len(g.tr.ops)
}

// enter starts hook call k on operator op: it closes the previous segment's
// trace and checks that the step follows the traced operator order.
func (g *Gemini) enter(op string) int {
	if !g.training {
		return -1
	}
	k := g.hook
	g.hook++
	if g.tracing() {
		g.closeSegment(k)
		if k == len(g.tr.ops) {
			g.tr.ops = append(g.tr.ops, op)
			g.tr.growth = append(g.tr.growth, 0)
			g.tr.endTotal = append(g.tr.endTotal, 0)
			g.tr.endModel = append(g.tr.endModel, 0)
			g.tr.users = append(g.tr.users, nil)
			g.tr.opPeak = append(g.tr.opPeak, 0)
		}
		return k
	}
	if g.offTrace || k >= len(g.tr.ops) || g.tr.ops[k] != op {
		// A step that departs from the traced order (it should not happen:
		// the model is static) runs the rest of the step conservatively.
		g.offTrace = true
		return -1
	}
	return k
}

// closeSegment records the segment that ended at hook k (k = number of
// hooks closes the last one, after backward).
func (g *Gemini) closeSegment(k int) {
	ms := g.dev.MemStats()
	g.notePeak(ms.TotalPeak)
	if k == 0 || k > len(g.tr.ops) {
		return
	}
	j := k - 1
	g.tr.growth[j] = max(g.tr.growth[j], ms.TotalPeak-g.tr.endTotal[j])
	g.tr.nonModel = max(g.tr.nonModel, ms.TotalPeak-g.tr.endModel[j])
	g.tr.opPeak[j] = max(g.tr.opPeak[j], ms.TotalPeak-g.tr.endModel[j])
	if b := g.cfg.DeviceBudget; b > 0 && ms.TotalPeak > b && g.overNote == "" {
		g.overNote = fmt.Sprintf("after %s the device reached %s, %s of it non-model, with only that operator's chunks resident",
			g.tr.ops[j], formatSize(ms.TotalPeak), formatSize(ms.TotalPeak-g.tr.endModel[j]))
	}
}

// exit ends hook call k: the next segment's peak starts now.
func (g *Gemini) exit(k int) {
	if k < 0 || !g.tracing() {
		return
	}
	ms := g.dev.MemStats()
	g.notePeak(ms.TotalPeak)
	g.tr.endTotal[k] = ms.Total()
	g.tr.endModel[k] = g.managedDev
	g.dev.ResetPeak()
}

// notePeak folds a device peak reading into the step's peak (resetting the
// peak per operator would otherwise lose it).
func (g *Gemini) notePeak(p int64) { g.stepPeak = max(g.stepPeak, p) }
