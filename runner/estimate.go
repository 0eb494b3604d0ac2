package runner

import (
	"fmt"
	"math"
	"time"
)

// estimateSteps is how many steps the start-of-run estimate averages. The
// first step of a session is left out: it pays for warm-up (allocations,
// kernel loading, graph capture), which the steps after it do not.
const estimateSteps = 4

// estimator measures the first steps of a session and says, once, how long
// the rest of the run will take, so a user who starts hours of work on a
// slow machine is told at once and not when the first epoch ends.
type estimator struct {
	seen int           // steps observed this session
	sum  time.Duration // time of steps 2..estimateSteps+1
	done bool
}

// observe takes one step's time; it returns the mean step time once
// enough steps were seen (and only that once).
func (e *estimator) observe(dt time.Duration) (time.Duration, bool) {
	if e.done {
		return 0, false
	}
	e.seen++
	if e.seen == 1 {
		return 0, false
	}
	e.sum += dt
	if e.seen <= estimateSteps {
		return 0, false
	}
	e.done = true
	return e.sum / estimateSteps, true
}

// estimate logs the time the rest of the run will take at the measured
// step time; over an hour it is a warning, so that it stands out.
func (j *job) estimate(dt time.Duration) {
	per, ok := j.est.observe(dt)
	if !ok {
		return
	}
	spe := j.info.StepsPerEpoch
	left := (j.spec.Epochs-j.epoch)*spe - j.step
	total := time.Duration(left) * per
	level := LevelInfo
	if total > time.Hour {
		level = LevelWarn
	}
	j.logf(level, "estimate: %s of training left (%d steps at %s/step on %s; evaluation not counted)",
		FormatDuration(total), left, per.Round(time.Millisecond/10), j.info.Backend)
}

// FormatDuration prints a remaining time the way the UI and the logs show
// it: 45s, 3m07s, 2h05m.
func FormatDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s >= 3600:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	case s >= 60:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%ds", s)
}

// FormatAccuracy formats a test accuracy as a percentage for the front
// ends; NaN is an epoch without evaluation (eval_every).
func FormatAccuracy(f float64) string {
	if math.IsNaN(f) {
		return "not evaluated"
	}
	return fmt.Sprintf("%.2f%%", 100*f)
}
