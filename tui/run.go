package tui

import (
	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/runner"
	"resnetlab/spec"
)

// status is what the TUI knows about a run. The pending states (pausing,
// resuming) are entered when a command is sent and left only when the runner
// confirms, so the screen never claims more than the runner has done.
type status int

const (
	stQueued status = iota
	stRunning
	stPausing
	stPaused
	stResuming
	stDone
	stFailed
	stStopped
	stInterrupted // Ctrl-C or SIGTERM: not the run's fault, and resumable
)

var statusNames = [...]string{"QUEUED", "RUNNING", "PAUSING…", "PAUSED", "RESUMING…", "DONE", "FAILED", "STOPPED", "INTERRUPTED"}

func (s status) String() string { return statusNames[s] }

// active reports whether the run is training (possibly paused) and so can
// take Pause, CheckpointNow and Stop.
func (s status) active() bool { return s >= stRunning && s <= stResuming }

// finished reports whether the run sent RunFinished.
func (s status) finished() bool { return s >= stDone }

// run is one grid cell: its info, status and one component per pane. Each
// component keeps its own state and updates itself from the run's events.
type run struct {
	info     runner.RunInfo
	status   status
	result   *report.Result
	err      error
	lastCkpt *runner.CheckpointSaved
	// from is where this session's training of the run started (zero: a
	// fresh start), history the epochs it had behind it then.
	from    ckpt.Ref
	history []report.EpochResult

	prog   progressPane
	mem    memoryPane
	chunks chunkStrip
	curves curvesPane
	log    logTail
	cmp    cmpStats // peaks and traffic for the comparison bars
}

func newRun(info runner.RunInfo) *run {
	r := &run{info: info}
	r.setInfo(info)
	return r
}

// setInfo (re)configures the panes that depend on the run's shape.
func (r *run) setInfo(info runner.RunInfo) {
	r.info = info
	r.prog.epochs, r.prog.steps = info.Epochs, info.StepsPerEpoch
	r.chunks.gemini = info.Plugin == spec.PluginGemini
	r.curves.steps = info.StepsPerEpoch
}

// Update applies one runner event to the run and its panes.
func (r *run) Update(ev runner.Event) {
	switch e := ev.(type) {
	case runner.RunQueued:
		if e.Info.Backend == "" { // a re-opened run keeps where it trained until it starts again
			e.Info.Backend, e.Info.Devices = r.info.Backend, r.info.Devices
		}
		r.setInfo(e.Info)
		if r.status.finished() { // re-opened by ResumeFrom: it waits to train again
			r.status, r.result, r.err = stQueued, nil, nil
		}
	case runner.RunStarted:
		r.setInfo(e.Info)
		r.status, r.result, r.err = stRunning, nil, nil
		r.from, r.history = e.From(), e.History
	case runner.StepDone:
		if r.status == stQueued || r.status == stResuming {
			r.status = stRunning // a step proves the run is going
		}
	case runner.Paused:
		r.status = stPaused
	case runner.Resumed:
		r.status = stRunning
	case runner.CheckpointSaved:
		c := e
		r.lastCkpt = &c
	case runner.RunFinished:
		r.finish(e)
	}
	r.prog.Update(ev)
	r.mem.Update(ev)
	r.chunks.Update(ev)
	r.curves.Update(ev)
	r.log.Update(ev)
	r.cmp.Update(ev)
}

func (r *run) finish(e runner.RunFinished) {
	r.result, r.err = e.Result, e.Err
	switch {
	case e.Result != nil && e.Result.Status == report.StatusStopped:
		r.status = stStopped
	case e.Result != nil && e.Result.Status == report.StatusInterrupted:
		r.status = stInterrupted
	case e.Err != nil || (e.Result != nil && e.Result.Status == report.StatusFailed):
		r.status = stFailed
	default:
		r.status = stDone
	}
}
