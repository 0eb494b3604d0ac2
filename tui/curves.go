package tui

import (
	"fmt"
	"math"
	"strconv"

	"resnetlab/report"
	"resnetlab/runner"
)

// curvesPane plots the training loss (every step) and the test accuracy
// (every epoch) of one run.
type curvesPane struct {
	steps  int       // steps per epoch, to place a step in the series
	losses []float64 // by global step index; NaN where a step is missing
	accs   []float64 // by epoch index
	// epochLoss is each epoch's mean training loss as the runner gave it
	// (EpochDone, or a resumed run's history), by epoch index: the
	// epochs before a resume in another process have no steps here.
	epochLoss []float64
}

func (c *curvesPane) Update(ev runner.Event) {
	switch e := ev.(type) {
	case runner.RunStarted:
		// A resumed run repeats what came after its checkpoint: drop it.
		epochs, steps := e.From().Done()
		c.losses = truncate(c.losses, epochs*max(c.steps, 0)+steps)
		c.accs = truncate(c.accs, epochs)
		c.epochLoss = truncate(c.epochLoss, epochs)
		c.fillHistory(e.History, epochs)
	case runner.StepDone:
		if e.Steps > 0 {
			c.steps = e.Steps
		}
		c.losses = place(c.losses, (e.Epoch-1)*c.steps+e.Step-1, e.Loss)
	case runner.EpochDone:
		c.accs = place(c.accs, e.Epoch-1, e.TestAcc)
		c.epochLoss = place(c.epochLoss, e.Epoch-1, e.Loss)
	case runner.RunFinished:
		if e.Result != nil {
			c.fillHistory(e.Result.EpochResults, len(e.Result.EpochResults))
		}
	}
}

// fillHistory adds the accuracies and mean losses of the recorded epochs
// up to upTo that the curves do not have (a run resumed in this process
// from another's checkpoint saw none of them).
func (c *curvesPane) fillHistory(es []report.EpochResult, upTo int) {
	for _, e := range es {
		if e.Epoch < 1 || e.Epoch > upTo {
			continue
		}
		c.accs = fill(c.accs, e.Epoch-1, e.TestAcc)
		c.epochLoss = fill(c.epochLoss, e.Epoch-1, e.Loss)
	}
}

// fill stores v at index i where xs has no finite value, keeping the rest.
func fill(xs []float64, i int, v float64) []float64 {
	for len(xs) <= i {
		xs = append(xs, math.NaN())
	}
	if !finite(xs[i]) {
		xs[i] = v
	}
	return xs
}

func truncate(xs []float64, n int) []float64 {
	if n < len(xs) {
		return xs[:max(n, 0)]
	}
	return xs
}

// place stores v at index i: a repeated index (after a resume) cuts the
// series there, a gap is filled with NaN so x positions stay true.
func place(xs []float64, i int, v float64) []float64 {
	if i < 0 {
		return xs
	}
	xs = truncate(xs, i)
	for len(xs) < i {
		xs = append(xs, math.NaN())
	}
	return append(xs, v)
}

// best returns the highest accuracy and its 1-based epoch (0 if none).
func (c *curvesPane) best() (float64, int) {
	b, at := 0.0, 0
	for i, a := range c.accs {
		if finite(a) && (at == 0 || a > b) {
			b, at = a, i+1
		}
	}
	return b, at
}

func (c *curvesPane) last() float64 {
	for i := len(c.accs) - 1; i >= 0; i-- {
		if finite(c.accs[i]) {
			return c.accs[i]
		}
	}
	return math.NaN()
}

// View renders both plots side by side when wide enough, else stacked.
func (c *curvesPane) View(w, h int, st styles) []string {
	if w >= 40 {
		lw := (w - 1) / 2
		return joinColumns(c.lossView(lw, h, st), c.accView(w-1-lw, h, st))
	}
	top := h / 2
	return append(c.lossView(w, top, st), c.accView(w, h-top, st)...)
}

func (c *curvesPane) lossView(w, h int, st styles) []string {
	title := "loss"
	if n := len(c.losses); n > 0 && finite(c.losses[n-1]) {
		title += fmt.Sprintf(" %.4f", c.losses[n-1])
	}
	// Both plots count x in epochs trained, labelled alike: the loss runs
	// from the first step (ep0) to the epochs done so far (ep2.6), the
	// accuracy from the end of epoch 1 to the last finished epoch.
	p := plot{ys: c.losses, xLo: "ep0"}
	if c.steps > 0 && len(c.losses) > 0 {
		p.xHi = "ep" + fmtEpochs(float64(len(c.losses))/float64(c.steps))
	}
	return withTitle(rule(title, w, st), p.render(w, h-1), w, h)
}

func (c *curvesPane) accView(w, h int, st styles) []string {
	title := "test acc"
	if b, at := c.best(); at > 0 {
		title += fmt.Sprintf(" %s · best %s @%d", fmtPct(c.last()), fmtPct(b), at)
	}
	p := plot{ys: c.accs, xLo: "ep1",
		yFmt: func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }}
	if len(c.accs) > 0 {
		p.xHi = fmt.Sprintf("ep%d", len(c.accs))
	}
	return withTitle(rule(title, w, st), p.render(w, h-1), w, h)
}

func withTitle(title string, body []string, w, h int) []string {
	return fitBlock(append([]string{title}, body...), w, h)
}

// fmtEpochs prints a count of epochs with at most one decimal: 3, 2.6.
func fmtEpochs(e float64) string {
	return strconv.FormatFloat(math.Floor(e*10)/10, 'f', -1, 64)
}
