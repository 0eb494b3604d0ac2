package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"resnetlab/report"
	"resnetlab/runner"
	"resnetlab/spec"
)

// headless prints a run's event stream as plain lines: one per epoch, log
// line, checkpoint, pause and state change, plus a step line every
// stepEvery per run (and for each run's first step, to show it is moving).
type headless struct {
	w         io.Writer
	now       func() time.Time
	stepEvery time.Duration

	infos    map[string]runner.RunInfo
	lastStep map[string]time.Time
	epochs   map[string]epochTimes // training time of the epochs seen, for the ETA
	results  []*report.Result
	kept     map[string]string // runs whose result file was left as it was (RunFinished.Kept): why
	failed   []string
	shown    map[string]bool // runs whose error a line has printed: the table does not repeat it
	progress *progress       // how far each run got, for what to run after an interrupt (nil: not kept)
}

func newHeadless(w io.Writer, now func() time.Time) *headless {
	return &headless{w: w, now: now, stepEvery: 10 * time.Second,
		infos: map[string]runner.RunInfo{}, lastStep: map[string]time.Time{},
		epochs: map[string]epochTimes{}, shown: map[string]bool{}, kept: map[string]string{}}
}

// consume prints events until the channel is closed.
func (h *headless) consume(events <-chan runner.Event) {
	for ev := range events {
		h.handle(ev)
	}
}

func (h *headless) printf(run, format string, args ...any) {
	prefix := ""
	if run != "" {
		prefix = "[" + run + "] "
	}
	fmt.Fprintf(h.w, prefix+format+"\n", args...)
}

func (h *headless) handle(ev runner.Event) {
	if h.progress != nil {
		h.progress.note(ev)
	}
	switch e := ev.(type) {
	case runner.RunQueued:
		h.queued(e.Info)
	case runner.RunStarted:
		h.infos[e.Info.ID] = e.Info
		if from := e.From(); !from.IsZero() {
			h.printf(e.Info.ID, "resumed from the checkpoint of %s%s", from.Describe(), placement(e.Info))
		} else {
			h.printf(e.Info.ID, "started%s", placement(e.Info))
		}
	case runner.StepDone:
		h.step(e)
	case runner.EpochDone:
		h.epoch(e)
	case runner.CheckpointSaved:
		only := "" // in a grid --resume alone resumes every run: --run names this one
		if h.progress != nil && len(h.progress.order) > 1 {
			only = " --run " + e.Run
		}
		h.printf(e.Run, "checkpoint of %s saved in %s (%d files; --resume %s%s continues from it)",
			e.Ref().Describe(), e.Dir, len(e.Files), e.Ref(), only)
	case runner.Paused:
		h.printf(e.Run, "paused at epoch %d step %d", e.Epoch, e.Step)
	case runner.Resumed:
		h.printf(e.Run, "resumed")
	case runner.Log:
		h.log(e)
	case runner.RunFinished:
		h.finished(e)
	}
	// MemoryUsage, ChunksUpdate, ChunkMoved and ChunkMoves are too frequent for a log;
	// their peaks reach the result files and the final table.
}

// epochTimes sums a run's epoch times (this session's: a resumed run's
// earlier epochs are not timed again).
type epochTimes struct {
	secs float64
	n    int
}

// epoch prints a finished epoch with the time the rest of the run will
// take at this session's mean epoch time.
func (h *headless) epoch(e runner.EpochDone) {
	t := h.epochs[e.Run]
	t.secs, t.n = t.secs+e.Seconds, t.n+1
	h.epochs[e.Run] = t
	total := h.infos[e.Run].Epochs
	eta := ""
	if left := total - e.Epoch; left > 0 {
		d := time.Duration(t.secs / float64(t.n) * float64(left) * float64(time.Second))
		eta = ", ETA " + runner.FormatDuration(d)
	}
	h.printf(e.Run, "epoch %d/%d: loss %.4f, test acc %s, lr %.3g, %.1f s%s",
		e.Epoch, total, e.Loss, pct(e.TestAcc), e.LR, e.Seconds, eta)
}

func (h *headless) queued(info runner.RunInfo) {
	h.infos[info.ID] = info
	h.printf(info.ID, "queued: %s %s, %d rank%s%s, %s, %d epochs x %d steps",
		info.Plugin, info.Precision, info.WorldSize, plural(info.WorldSize), placement(info), info.Dataset,
		info.Epochs, info.StepsPerEpoch)
}

// placement is " on cuda (cuda:0, cuda:1)", or "" before the backend is known.
func placement(info runner.RunInfo) string {
	if info.Backend == "" {
		return ""
	}
	s := " on " + info.Backend
	if len(info.Devices) > 0 {
		s += " (" + strings.Join(info.Devices, ", ") + ")"
	}
	return s
}

func (h *headless) step(e runner.StepDone) {
	now := h.now()
	last, seen := h.lastStep[e.Run]
	if seen && now.Sub(last) < h.stepEvery {
		return
	}
	h.lastStep[e.Run] = now
	scale := ""
	if e.LossScale > 0 {
		scale = fmt.Sprintf(", loss scale %g", e.LossScale)
	}
	if e.Skipped {
		scale += " (step skipped: inf/nan gradients)"
	}
	info := h.infos[e.Run]
	left := (info.Epochs-e.Epoch)*e.Steps + e.Steps - e.Step
	h.printf(e.Run, "epoch %d/%d step %d/%d: loss %.4f%s, %.1f ms/step, %.0f img/s, ETA %s",
		e.Epoch, info.Epochs, e.Step, e.Steps, e.Loss, scale,
		float64(e.StepTime)/float64(time.Millisecond), e.ImagesPerSec,
		runner.FormatDuration(time.Duration(left)*e.StepTime))
}

func (h *headless) log(e runner.Log) {
	if e.Level == runner.LevelWarn || e.Level == runner.LevelError {
		h.printf(e.Run, "%s: %s", e.Level, e.Text)
		return
	}
	h.printf(e.Run, "%s", e.Text)
}

func (h *headless) finished(e runner.RunFinished) {
	if e.Result != nil {
		h.results = append(h.results, e.Result)
	}
	if e.Kept != "" {
		h.kept[e.Run] = e.Kept
	}
	if e.Err != nil {
		var pe *runner.PreflightError
		if errors.As(e.Err, &pe) { // one problem for every run: run prints it once, at the end
			return
		}
		h.failed = append(h.failed, e.Run)
		h.shown[e.Run] = true
		if errors.Is(e.Err, context.Canceled) { // Ctrl-C: not the run's fault
			h.printf(e.Run, "%v", e.Err)
			return
		}
		h.printf(e.Run, "FAILED: %s", clipLines(e.Err.Error(), maxErrLines))
		return
	}
	r := e.Result
	if r == nil {
		h.printf(e.Run, "finished")
		return
	}
	h.printf(e.Run, "%s: final test acc %s (best %s), %.1f s of training, %.0f img/s",
		r.Status, pct(r.FinalTestAcc), pct(r.BestTestAcc), r.TrainSeconds, r.ImagesPerSecond)
	if line := rankPeaks(r); line != "" {
		h.printf(e.Run, "%s", line)
	}
}

// rankPeaks is every rank's peak memory on one line, for a run of several
// ranks ("" otherwise, or before any rank measured): in a world of
// processes, rank 0's line shows what the others reported.
func rankPeaks(r *report.Result) string {
	if len(r.PeakDeviceBytes) < 2 || len(r.PeakHostBytes) != len(r.PeakDeviceBytes) {
		return ""
	}
	parts := make([]string, len(r.PeakDeviceBytes))
	seen := false
	for i, d := range r.PeakDeviceBytes {
		hb := r.PeakHostBytes[i]
		parts[i] = fmt.Sprintf("rank %d device %s host %s", i, peakSize(d), peakSize(hb))
		seen = seen || d > 0 || hb > 0
	}
	if !seen {
		return ""
	}
	return "peak memory: " + strings.Join(parts, "; ")
}

// peakSize is a peak in bytes, "-" when the rank never reported one.
func peakSize(n int64) string {
	if n == 0 {
		return "-"
	}
	return spec.FormatSize(n)
}

// summary prints the comparison table of every finished run, fitted to
// width columns (0: no limit). A run's error printed on its FAILED line
// is not repeated under the table: its status column says failed.
func (h *headless) summary(width int) {
	if len(h.results) == 0 {
		return
	}
	rs := make([]*report.Result, len(h.results))
	for i, r := range h.results {
		if rs[i] = r; h.shown[r.Run] {
			c := *r
			c.Error = ""
			rs[i] = &c
		}
	}
	fmt.Fprintf(h.w, "\n%s", report.CompareTableWidth(rs, width))
}

func pct(f float64) string { return runner.FormatAccuracy(f) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
