package tui

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"resnetlab/runner"
)

// onEvents applies a batch of runner events in order and re-issues the
// read of the next ones (or handles the end of the stream behind them).
func (m Model) onEvents(evs []runner.Event, closed bool) (tea.Model, tea.Cmd) {
	for _, ev := range evs {
		if m.onEvent(ev) {
			return m, tea.Quit
		}
	}
	if closed {
		return m.onClosed()
	}
	return m, m.waitEvent()
}

// onClosed notes that the runner has exited (its event stream closed).
func (m Model) onClosed() (tea.Model, tea.Cmd) {
	if !m.allFinished() { // else keep "all runs finished", the better news
		m.notice = note("event stream closed")
	}
	m.closed = true
	if len(m.stopping) > 0 {
		return m, tea.Quit
	}
	return m, nil
}

// onEvent hands a runner event to its run and updates the notice line; it
// reports whether the UI should quit (the runs it stopped have finished).
func (m *Model) onEvent(ev runner.Event) (quit bool) {
	if l, ok := ev.(runner.Log); ok && l.Run == "" {
		m.gridLog(l)
		return false
	}
	r := m.runFor(ev)
	wasDone := m.allFinished()
	r.Update(ev)
	switch e := ev.(type) {
	case runner.Log:
		m.resumeAnswer(e)
	case runner.RunQueued:
		delete(m.asked, e.Info.ID) // re-opened: it starts from the checkpoint
	case runner.RunStarted:
		delete(m.asked, e.Info.ID)
		// Show the run that starts unless the one shown is training:
		// with concurrent runs the screen stays on the first to start.
		if !m.runs[m.sel].status.active() {
			m.sel = m.byID[e.Info.ID]
		}
		if from := e.From(); !from.IsZero() {
			m.notice = note("%s resumed from %s", e.Info.ID, from.Describe())
		}
	case runner.Paused:
		m.notice = note("%s paused at epoch %d step %d · p resumes", e.Run, e.Epoch, e.Step)
	case runner.Resumed:
		m.notice = note("%s resumed", e.Run)
	case runner.CheckpointSaved:
		m.notice = notice{text: savedText(e), ok: true}
	case runner.RunFinished:
		m.notice = notice{text: finishedText(r)}
		if m.follow && m.runs[m.sel] == r { // concurrent runs: go on showing one that trains
			if i := slices.IndexFunc(m.runs, func(o *run) bool { return o.status.active() }); i >= 0 {
				m.sel = i
			}
		}
		if m.stopping[e.Run] {
			delete(m.stopping, e.Run)
			if len(m.stopping) == 0 {
				return true
			}
		}
	}
	if !wasDone && m.allFinished() && len(m.stopping) == 0 {
		m.notice = note("all runs finished · v compares them · q or enter exits")
	}
	return false
}

// resumeAnswer shows on the notice line, not only in the log, why the
// runner refused a ResumeFrom the r key sent. The runner answers a
// refusal with an error line for the run (a missing checkpoint, another
// model) or a warning (a world of processes, a grid being quit), and an
// accepted resume with RunStarted; a warning may also come before an
// accepted one (other steps per epoch), so only an error is called a
// refusal and a warning keeps waiting for the answer.
func (m *Model) resumeAnswer(l runner.Log) {
	ref, ok := m.asked[l.Run]
	switch {
	case !ok || l.Level == runner.LevelInfo:
	case l.Level == runner.LevelError:
		delete(m.asked, l.Run)
		m.notice = note("resume of %s from %s refused: %s", l.Run, ref.Describe(), l.Text)
	default:
		m.notice = note("resume of %s from %s: %s", l.Run, ref.Describe(), l.Text)
	}
}

// gridLog shows a line about the whole grid (a skipped cell, how concurrent
// runs share the devices) in every run's log and on the notice line; it
// is no run of its own.
func (m *Model) gridLog(l runner.Log) {
	m.gridLines = append(m.gridLines, l)
	for _, r := range m.runs {
		r.log.Update(l)
	}
	m.notice = note("%s", l.Text)
}

// runFor finds the event's run, adding runs the grid did not list.
func (m *Model) runFor(ev runner.Event) *run {
	if i, ok := m.byID[ev.RunID()]; ok {
		return m.runs[i]
	}
	switch e := ev.(type) {
	case runner.RunQueued:
		return m.addRun(e.Info)
	case runner.RunStarted:
		return m.addRun(e.Info)
	}
	return m.addRun(runner.RunInfo{ID: ev.RunID()})
}

func savedText(e runner.CheckpointSaved) string {
	names := make([]string, len(e.Files))
	for i, f := range e.Files {
		names[i] = filepath.Base(f)
	}
	return fmt.Sprintf("checkpoint saved: %s %s → %s (%s)", e.Run, e.Ref().Describe(), e.Dir, strings.Join(names, ", "))
}

// resumeWith tells how to go on with an interrupted run.
func resumeWith(r *run) string {
	if r.lastCkpt == nil {
		return ""
	}
	return fmt.Sprintf(" · checkpoint of %s saved · r resumes from it", r.lastCkpt.Ref().Describe())
}

func finishedText(r *run) string {
	switch r.status {
	case stFailed:
		if r.err != nil {
			return fmt.Sprintf("%s failed: %v", r.info.ID, r.err)
		}
		return r.info.ID + " failed"
	case stStopped:
		return r.info.ID + " stopped"
	case stInterrupted:
		return r.info.ID + " interrupted" + resumeWith(r)
	}
	return fmt.Sprintf("%s done · final acc %s", r.info.ID, finalAcc(r))
}
