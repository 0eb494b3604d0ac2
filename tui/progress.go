package tui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/report"
	"resnetlab/runner"
)

// progressPane shows the epoch and whole-run progress bars, throughput and
// ETA. Everything is derived from the runner's events (step times, epoch
// seconds), never from the wall clock, so the screen is reproducible.
type progressPane struct {
	epochs, steps int // totals from RunInfo (steps may be refined by StepDone)
	epoch, step   int // epoch in progress (1-based) and last finished step
	doneEpochs    int // last epoch with an EpochDone
	loss          float64
	lossScale     float64
	skipped       int
	stepEMA       time.Duration // smoothed step time
	rateEMA       float64       // smoothed images/s
	epochSecs     []float64     // training seconds of the epochs seen this session
}

// ema weights the newest sample by 1/8: smooth yet quick to follow changes.
const emaW = 0.125

func (p *progressPane) Update(ev runner.Event) {
	switch e := ev.(type) {
	case runner.RunQueued:
		// Queued (first or re-opened): nothing trains until RunStarted says
		// from which epoch, so the bars are empty, not the last run's.
		p.epoch, p.step, p.doneEpochs = 0, 0, 0
		p.stepEMA, p.rateEMA, p.epochSecs = 0, 0, nil
	case runner.RunStarted:
		done, steps := e.From().Done()
		p.epoch, p.step, p.doneEpochs = done+1, steps, done
		p.stepEMA, p.rateEMA, p.epochSecs = 0, 0, nil
	case runner.StepDone:
		p.onStep(e)
	case runner.EpochDone:
		p.doneEpochs = e.Epoch
		p.epochSecs = append(p.epochSecs, e.Seconds)
		if p.step >= p.steps && p.epoch == e.Epoch && e.Epoch < p.epochs {
			p.epoch, p.step = e.Epoch+1, 0
		}
	case runner.RunFinished:
		if e.Err == nil && (e.Result == nil || e.Result.Status == report.StatusDone) {
			p.epoch, p.step, p.doneEpochs = p.epochs, p.steps, p.epochs
		}
	}
}

func (p *progressPane) onStep(e runner.StepDone) {
	p.epoch, p.step, p.loss, p.lossScale = e.Epoch, e.Step, e.Loss, e.LossScale
	if e.Steps > 0 {
		p.steps = e.Steps
	}
	if e.Skipped {
		p.skipped++
	}
	if p.stepEMA == 0 {
		p.stepEMA, p.rateEMA = e.StepTime, e.ImagesPerSec
		return
	}
	p.stepEMA += time.Duration(emaW * float64(e.StepTime-p.stepEMA))
	p.rateEMA += emaW * (e.ImagesPerSec - p.rateEMA)
}

// fractions returns the progress within the epoch and over the whole run.
func (p *progressPane) fractions() (epoch, total float64) {
	if p.steps <= 0 {
		return 0, 0
	}
	epoch = float64(p.step) / float64(p.steps)
	if p.epochs > 0 {
		done := max(p.epoch-1, 0)*p.steps + p.step
		total = float64(done) / float64(p.epochs*p.steps)
	}
	return min(epoch, 1), min(total, 1)
}

// eta estimates the remaining training time: per-step cost from the mean
// epoch time when an epoch has finished, else from the smoothed step time.
func (p *progressPane) eta() (time.Duration, bool) {
	if p.steps <= 0 || p.epochs <= 0 {
		return 0, false
	}
	per := p.stepEMA
	if n := len(p.epochSecs); n > 0 {
		per = time.Duration(sum(p.epochSecs) / float64(n) / float64(p.steps) * float64(time.Second))
	}
	if per <= 0 {
		return 0, false
	}
	left := p.epochs*p.steps - (max(p.epoch-1, 0)*p.steps + p.step)
	return time.Duration(left) * per, true
}

func (p *progressPane) meanEpochSecs() float64 {
	if len(p.epochSecs) == 0 {
		return 0
	}
	return sum(p.epochSecs) / float64(len(p.epochSecs))
}

// View renders three lines: epoch bar, run bar with ETA, throughput.
func (p *progressPane) View(w int, st styles) []string {
	fe, ft := p.fractions()
	epochTxt := fmt.Sprintf("epoch %*d/%d", digits(p.epochs), max(p.epoch, 0), p.epochs)
	stepTxt := fmt.Sprintf("step %*d/%d", digits(p.steps), p.step, p.steps)
	etaTxt := "ETA --"
	if d, ok := p.eta(); ok {
		etaTxt = "ETA " + fmtETA(d)
	}
	runTxt := fmt.Sprintf("%5.1f%%  %s", 100*ft, etaTxt)
	label := max(len(epochTxt), len("run"))
	lines := []string{
		barLine(padRight(epochTxt, label), stepTxt, fe, w, st),
		barLine(padRight("run", label), runTxt, ft, w, st),
		p.statsLine(st),
	}
	return fitBlock(lines, w, 3)
}

func (p *progressPane) statsLine(st styles) string {
	parts := []string{"-- img/s", "-- /step"}
	if p.stepEMA > 0 {
		parts = []string{fmtRate(p.rateEMA), fmtStep(p.stepEMA) + "/step"}
	}
	if m := p.meanEpochSecs(); m > 0 {
		parts = append(parts, fmt.Sprintf("epoch %.1fs", m))
	}
	if p.stepEMA > 0 {
		parts = append(parts, fmt.Sprintf("loss %.4f", p.loss))
	}
	if p.lossScale > 0 {
		parts = append(parts, "scale "+fmtScale(p.lossScale))
	}
	if p.skipped > 0 {
		parts = append(parts, st.warn.Render(fmt.Sprintf("%d skipped", p.skipped)))
	}
	return strings.Join(parts, " · ")
}

// barLine is "label bar suffix" filling w cells; the bar takes what is left.
func barLine(label, suffix string, f float64, w int, st styles) string {
	bw := w - ansi.StringWidth(label) - ansi.StringWidth(suffix) - 2
	if bw < 4 {
		return label + " " + suffix
	}
	return label + " " + bar(f, bw, st) + " " + suffix
}

// bar is a w-cell progress bar filled to fraction f (rounded to the cell).
func bar(f float64, w int, st styles) string {
	n := int(math.Round(min(max(f, 0), 1) * float64(w)))
	return st.ok.Render(strings.Repeat("█", n)) + st.dim.Render(strings.Repeat("░", w-n))
}

// padRight pads s with spaces to w cells (cells, not bytes: s may be
// styled or hold wide runes).
func padRight(s string, w int) string {
	if n := w - ansi.StringWidth(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}

func digits(n int) int { return len(fmt.Sprint(n)) }

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// fmtScale prints a loss scale: whole (the powers of two a scaler steps
// through: 65536, 32) up to 2^40, else in 4 significant digits.
func fmtScale(v float64) string {
	if v == math.Trunc(v) && v <= 1<<40 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
