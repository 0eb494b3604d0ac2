package tui

import (
	"context"
	"errors"
	"slices"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"resnetlab/ckpt"
	"resnetlab/runner"
)

// Options connects the TUI to a runner.
type Options struct {
	Title       string           // spec name + path
	SpecFile    string           // the spec's path, for the resume hint once the runner has exited
	Relaunch    string           // the command line that trains the spec again, less --resume and the spec ("": resnetlab run); resnetlab launch's own in a world it started
	Runs        []runner.RunInfo // every cell of the grid, in order
	Events      <-chan runner.Event
	Send        func(run string, c runner.Command) bool // deliver a command to run ("": to the grid) and report whether it was queued; must not block for long
	Checkpoints func(run string) []ckpt.Ref             // the run's saved checkpoints, in training order, for the r key
}

// Messages of the root model.
type (
	eventMsg struct{ ev runner.Event }
	// eventsMsg is every event the runner had queued when one was read (at
	// most maxBatch): the model applies them all before the next frame.
	// closed: the channel was closed behind them.
	eventsMsg struct {
		evs    []runner.Event
		closed bool
	}
	eventsClosedMsg struct{}
	// frameMsg is due frameEvery after events changed the model: the
	// screen is drawn again then (see frame).
	frameMsg       struct{}
	checkpointsMsg struct {
		run  string
		refs []ckpt.Ref
	}
)

type overlayKind int

const (
	noOverlay overlayKind = iota
	helpOverlay
	quitOverlay
	pickerOverlay
)

// Model is the root tea.Model.
type Model struct {
	opts      Options
	keys      keyMap
	st        styles
	head      header
	w, h      int
	runs      []*run
	byID      map[string]int
	sel       int
	follow    bool // until tab is used, the selection leaves a run that ends for one that trains
	compare   bool
	cmp       compareState // the comparison's shown runs, epoch cursor and bar page
	overlay   overlayKind
	quitDlg   quitDialog
	picker    resumePicker
	notice    notice
	stopping  map[string]bool     // runs sent Stop; quit once all have finished
	asked     map[string]ckpt.Ref // runs sent ResumeFrom that have not started from it yet
	closed    bool                // the event channel was closed
	gridLines []runner.Log        // log lines about the whole grid, for runs not known yet
	// The screen is drawn at most every frameEvery for runner events, at
	// once for keys and resizes: ver counts the updates, lazy says the
	// last ones were events only (a frameMsg is due to draw them), fr is
	// the last screen drawn (shared by the copies of the model).
	ver  uint64
	lazy bool
	fr   *frame
}

// frameEvery is the frame interval for runner events (10 frames a
// second): a step or memory report between two frames waits for the next.
const frameEvery = 100 * time.Millisecond

// maxBatch bounds the events applied in one update.
const maxBatch = 512

// frame is the last screen View drew and what it drew it from.
type frame struct {
	text    string
	ver     uint64
	w, h    int
	drawn   bool
	ticking bool // a frameMsg is on its way
	renders int  // screens drawn so far (tests read it)
}

// New builds the model for the given runner connection.
func New(o Options) Model {
	m := Model{
		opts: o, keys: defaultKeys(), st: newStyles(false), head: header{title: o.Title},
		byID: map[string]int{}, follow: true, stopping: map[string]bool{}, asked: map[string]ckpt.Ref{},
		fr: &frame{},
	}
	for _, info := range o.Runs {
		m.addRun(info)
	}
	return m
}

// Run runs the program until the user quits, or until every run has
// finished and a key is pressed. Cancelling ctx ends it too.
func Run(ctx context.Context, o Options) error {
	p := tea.NewProgram(New(o), tea.WithContext(ctx))
	_, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (m *Model) addRun(info runner.RunInfo) *run {
	if i, ok := m.byID[info.ID]; ok {
		return m.runs[i]
	}
	m.byID[info.ID] = len(m.runs)
	r := newRun(info)
	for _, l := range m.gridLines {
		r.log.Update(l)
	}
	m.runs = append(m.runs, r)
	return r
}

// Init starts reading the event channel.
func (m Model) Init() tea.Cmd { return m.waitEvent() }

// waitEvent is the command that blocks for the next runner event and
// takes every event queued behind it (up to maxBatch); it is issued again
// after every batch, so exactly one read is pending.
func (m Model) waitEvent() tea.Cmd {
	ch := m.opts.Events
	if ch == nil || m.closed {
		return nil
	}
	return func() tea.Msg {
		ev, ok := <-ch
		if !ok {
			return eventsClosedMsg{}
		}
		evs := []runner.Event{ev}
		for len(evs) < maxBatch {
			select {
			case ev, ok := <-ch:
				if !ok {
					return eventsMsg{evs: evs, closed: true}
				}
				evs = append(evs, ev)
			default:
				return eventsMsg{evs: evs}
			}
		}
		return eventsMsg{evs: evs}
	}
}

// Update applies a message. Runner events are drawn with the next frame
// (frameEvery after the first of them), everything else at once.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if _, ok := msg.(frameMsg); ok {
		m.fr.ticking, m.lazy = false, false
		return m, nil
	}
	nm, cmd := m.update(msg)
	m = nm.(Model)
	m.ver++
	switch msg.(type) {
	case eventMsg, eventsMsg:
		m.lazy = true
		if !m.fr.ticking {
			m.fr.ticking = true
			cmd = tea.Batch(cmd, tea.Tick(frameEvery, func(time.Time) tea.Msg { return frameMsg{} }))
		}
	default:
		m.lazy = false
	}
	return m, cmd
}

// update routes a message to the handler of its kind.
func (m Model) update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
	case tea.ColorProfileMsg:
		m.st = newStyles(msg.Profile <= colorprofile.ASCII)
	case eventMsg:
		return m.onEvents([]runner.Event{msg.ev}, false)
	case eventsMsg:
		return m.onEvents(msg.evs, msg.closed)
	case eventsClosedMsg:
		return m.onClosed()
	case checkpointsMsg:
		m.picker = resumePicker{run: msg.run, refs: msg.refs}
		if i, ok := m.byID[msg.run]; ok && m.runs[i].status.finished() {
			m.picker.finished = m.runs[i].status
			m.picker.refs = trainable(msg.refs, m.runs[i].info.Epochs)
			m.picker.last = len(m.picker.refs) < len(msg.refs)
		}
		m.overlay = pickerOverlay
	case tea.KeyPressMsg:
		return m.onKey(msg)
	}
	return m, nil
}

// selected is the run shown on the dashboard (nil before any run is known).
func (m Model) selected() *run {
	if len(m.runs) == 0 {
		return nil
	}
	return m.runs[m.sel]
}

// allFinished reports whether every known run has sent RunFinished.
func (m Model) allFinished() bool {
	if m.closed {
		return true
	}
	return len(m.runs) > 0 && !slices.ContainsFunc(m.runs, func(r *run) bool { return !r.status.finished() })
}

// send delivers c and reports whether it was queued: false when the
// runner's command queue is full (then the caller says so and changes
// nothing, so the user can press the key again).
func (m Model) send(run string, c runner.Command) bool {
	return m.opts.Send == nil || m.opts.Send(run, c)
}

// notSent is the notice for a command the runner's full queue refused.
func notSent(what, id string) notice {
	return note("%s for %s not sent (the runner's queue is full): press again", what, id)
}

// trainable drops the checkpoints a finished run of epochs epochs would
// train nothing from: the end of its last epoch (or later).
func trainable(refs []ckpt.Ref, epochs int) []ckpt.Ref {
	var out []ckpt.Ref
	for _, r := range refs {
		if r.Step == 0 && r.Epoch >= epochs {
			continue
		}
		out = append(out, r)
	}
	return out
}
