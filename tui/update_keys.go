package tui

import (
	"slices"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"resnetlab/ckpt"
	"resnetlab/runner"
)

// onKey routes a key to the open overlay, or else to the dashboard actions.
func (m Model) onKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if key.Matches(msg, m.keys.ForceQuit) {
		// Ctrl-C is SIGINT's twin: the front end closes the runner's
		// context and every training run checkpoints (when it keeps
		// checkpoints) and ends interrupted, as headless.
		return m, tea.Quit
	}
	if len(m.stopping) > 0 {
		m.notice = note("waiting for %d run(s) to stop · ctrl+c quits at once", len(m.stopping))
		return m, nil
	}
	switch m.overlay {
	case helpOverlay:
		m.overlay = noOverlay
		return m, nil
	case quitOverlay:
		return m.onQuitKey(msg)
	case pickerOverlay:
		return m.onPickerKey(msg)
	}
	return m.onDashboardKey(msg)
}

func (m Model) onDashboardKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	k := m.keys
	r := m.selected()
	if m.compare && r != nil && m.onCompareKey(msg) {
		return m, nil
	}
	switch {
	case m.allFinished() && key.Matches(msg, k.Exit):
		return m, tea.Quit
	case r == nil:
		return m, nil
	case key.Matches(msg, k.Pause):
		m.togglePause(r)
	case key.Matches(msg, k.Checkpoint):
		m.checkpointNow(r)
	case key.Matches(msg, k.Resume):
		return m, m.loadCheckpoints(r.info.ID)
	case key.Matches(msg, k.Next):
		m.sel, m.follow = (m.sel+1)%len(m.runs), false
	case key.Matches(msg, k.Prev):
		m.sel, m.follow = (m.sel+len(m.runs)-1)%len(m.runs), false
	case key.Matches(msg, k.Compare):
		m.compare = !m.compare
	case key.Matches(msg, k.Cancel):
		m.compare = false
	case key.Matches(msg, k.Help):
		m.overlay = helpOverlay
	case key.Matches(msg, k.Quit):
		m.quitDlg = m.countActive()
		m.overlay = quitOverlay
	}
	return m, nil
}

// onCompareKey handles the comparison's own keys (they come before exit,
// so that space toggles a run and esc leaves the comparison even once every
// run has finished); it reports whether the key was one of them.
func (m *Model) onCompareKey(msg tea.KeyPressMsg) bool {
	k := m.keys
	c := &m.cmp
	switch {
	case key.Matches(msg, k.Toggle):
		id := m.runs[m.sel].info.ID
		if c.hidden == nil {
			c.hidden = map[string]bool{}
		}
		c.hidden[id] = !c.hidden[id]
	case key.Matches(msg, k.ShowAll):
		c.hidden = nil
	case key.Matches(msg, k.EpochLeft):
		c.epoch = max(cursorEpoch(m.runs, *c)-1, 1)
	case key.Matches(msg, k.EpochRight):
		if e := cursorEpoch(m.runs, *c) + 1; e < maxEpochs(m.runs, *c) {
			c.epoch = e
		} else {
			c.epoch = 0 // the newest epoch, and it follows new ones
		}
	case key.Matches(msg, k.BarPage):
		c.page = (c.page + barsPerRow(m.width())) % len(allBarGroups) // the next row of groups
	case key.Matches(msg, k.Cancel):
		m.compare = false
	default:
		return false
	}
	return true
}

// togglePause sends Pause or Resume; the status says PAUSED/RUNNING only
// when the runner confirms with Paused/Resumed. While it waits, p asks
// again: the runner answers every Pause and Resume, so the run never stays
// PAUSING… or RESUMING… for good. A command the runner's full queue
// refuses changes nothing and says so.
func (m *Model) togglePause(r *run) {
	id := r.info.ID
	if !r.status.active() {
		m.notice = note("%s is not training (%s)", id, r.status)
		return
	}
	c, what := runner.Command(runner.Pause{}), "pause"
	if r.status == stPaused || r.status == stResuming {
		c, what = runner.Resume{}, "resume"
	}
	if !m.send(id, c) {
		m.notice = notSent(what, id)
		return
	}
	switch r.status {
	case stRunning:
		r.status = stPausing
		m.notice = note("pause requested for %s (takes effect after the current step)", id)
	case stPaused:
		r.status = stResuming
		m.notice = note("resume requested for %s", id)
	case stPausing:
		m.notice = note("waiting for %s to confirm the pause (asked again)", id)
	case stResuming:
		m.notice = note("waiting for %s to confirm the resume (asked again)", id)
	}
}

func (m *Model) checkpointNow(r *run) {
	id := r.info.ID
	if !r.status.active() {
		m.notice = note("%s is not training (%s): nothing to checkpoint", id, r.status)
		return
	}
	if !m.send(id, runner.CheckpointNow{}) {
		m.notice = notSent("checkpoint", id)
		return
	}
	m.notice = note("checkpoint requested for %s…", id)
}

// loadCheckpoints lists the run's checkpoints off the UI loop (it may read
// a directory) and answers with a checkpointsMsg that opens the picker.
func (m Model) loadCheckpoints(id string) tea.Cmd {
	list := m.opts.Checkpoints
	return func() tea.Msg {
		var refs []ckpt.Ref
		if list != nil {
			refs = slices.Clone(list(id))
		}
		slices.SortFunc(refs, ckpt.CompareRefs)
		slices.Reverse(refs) // newest first: the usual choice
		return checkpointsMsg{run: id, refs: slices.Compact(refs)}
	}
}

func (m Model) onQuitKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch m.quitDlg.Update(msg, m.keys) {
	case dialogYes:
		return m.stopAndQuit(true)
	case dialogNo:
		return m.stopAndQuit(false)
	case dialogCancel:
		m.overlay = noOverlay
	}
	return m, nil
}

func (m Model) onPickerKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch m.picker.Update(msg, m.keys) {
	case dialogYes:
		m.overlay = noOverlay
		m.resumeFrom(m.picker.run, m.picker.chosen())
	case dialogCancel:
		m.overlay = noOverlay
	}
	return m, nil
}

// resumeFrom sends ResumeFrom. A finished run is re-opened by the runner
// (it trains again from epoch e to the end and its result is replaced);
// once the runner has exited nothing can re-open it, so the notice says
// how to resume from the command line instead.
func (m *Model) resumeFrom(id string, ref ckpt.Ref) {
	r := m.runs[m.byID[id]]
	switch {
	case r.status.finished() && m.closed:
		spec := m.opts.SpecFile
		if spec == "" {
			spec = "SPEC"
		}
		only := "" // one run of several: --run names it, or every run would resume
		if len(m.runs) > 1 {
			only = " --run " + id
		}
		again := m.opts.Relaunch
		if again == "" {
			again = "resnetlab run"
		}
		m.notice = note("%s has finished and the runner has exited · to train from %s again: "+
			"%s --resume %s%s %s", id, ref.Describe(), again, ref, only, spec)
		m.notice.wrap = true
	case !m.send(id, runner.ResumeFrom(ref)):
		m.notice = notSent("resume from "+ref.Describe(), id)
	case r.status.finished():
		m.asked[id] = ref
		m.notice = note("re-opening %s from %s: it trains to epoch %d again and its result is replaced",
			id, ref.Describe(), r.info.Epochs)
	default:
		m.asked[id] = ref
		m.notice = note("resume of %s from %s requested", id, ref.Describe())
	}
}

// stopAndQuit sends Quit to the grid, once: no queued run starts, every
// training run stops (checkpointing first if asked) and is recorded
// interrupted; the UI quits once they have all finished (at once when none
// is training).
func (m Model) stopAndQuit(checkpoint bool) (tea.Model, tea.Cmd) {
	m.overlay = noOverlay
	if m.closed {
		return m, tea.Quit
	}
	if !m.send("", runner.Quit{Checkpoint: checkpoint}) {
		m.notice = notSent("quit", "the grid")
		return m, nil
	}
	n := m.markStopping()
	if n == 0 {
		return m, tea.Quit
	}
	what := "without checkpoint"
	if checkpoint {
		what = "checkpointing first"
	}
	m.notice = note("stopping %d run(s), %s… ctrl+c quits at once", n, what)
	return m, nil
}

// markStopping remembers the training runs, which Quit stops.
func (m *Model) markStopping() int {
	n := 0
	for _, r := range m.runs {
		if r.status.active() {
			m.stopping[r.info.ID] = true
			n++
		}
	}
	return n
}

// countActive counts the runs Quit stops, the paused ones apart: a run
// is paused once the runner said so and until it confirms the resume.
func (m Model) countActive() quitDialog {
	var d quitDialog
	for _, r := range m.runs {
		switch {
		case r.status == stPaused || r.status == stResuming:
			d.paused++
		case r.status.active():
			d.training++
		}
	}
	return d
}
