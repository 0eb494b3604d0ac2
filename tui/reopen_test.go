package tui

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/runner"
)

// r on a run that has finished opens the picker, which says the run will
// train again; enter sends ResumeFrom and the runner re-opens the run: it
// is queued, trains from the chosen epoch (RUNNING, the log says from
// where) and the grid is over again once it ends.
func TestResumeFinishedRunReopensIt(t *testing.T) {
	f := newFakeRunner(t, 0)
	const id = "low_level_zero-fp16-2" // the last run: shown when the grid is over
	f.reopenHalt = haltAt{run: id, epoch: 3, step: 10}
	f.start()
	tm, rec := startTUI(t, f.options(), 100, 30)
	waitScreen(t, rec, "all finished", contains("all runs finished"))
	waitScreen(t, rec, id+" DONE", contains(id+" DONE"))
	sendKey(tm, "r")
	s := waitScreen(t, rec, "picker", contains("Resume "+id+" from checkpoint"))
	// The end of the last epoch is not offered: there is nothing to train
	// from it.
	if !strings.Contains(s, "is done: it trains again from the") || !strings.Contains(s, "▸ epoch 2") || regexp.MustCompile(`│\s+epoch 4\s+│`).MatchString(s) {
		t.Fatalf("the picker should say the finished run trains again, newest epoch it can train from first, not epoch 4:\n%s", s)
	}
	sendKey(tm, "enter")
	waitHalted(t, f, rec)
	s, _ = rec.get()
	for _, want := range []string{id + " RUNNING", "epoch 3/4", "started from the checkpoint of epoch 2"} {
		if !strings.Contains(s, want) {
			t.Errorf("re-opened run: screen lacks %q:\n%s", want, s)
		}
	}
	if !hasCmd(f.commands(), id, runner.ResumeFrom{Epoch: 2}) {
		t.Fatalf("ResumeFrom{2} not sent to %s: %v", id, f.commands())
	}
	if strings.Contains(s, "all runs finished") {
		t.Errorf("a run trains again, yet the screen says all finished:\n%s", s)
	}
}

// Once the runner has exited (closed event stream), nothing can re-open a
// finished run: enter in the picker sends nothing and the notice says how
// to resume from the command line.
func TestResumeFinishedRunAfterRunnerExited(t *testing.T) {
	var sent []sentCmd
	m := New(Options{Runs: testGrid()[:1], SpecFile: "experiments/zero.toml",
		Send: func(run string, c runner.Command) bool { sent = append(sent, sentCmd{run, c}); return true }})
	id := m.runs[0].info.ID
	m = step(m, eventMsg{runner.RunStarted{Info: m.runs[0].info}})
	m = step(m, eventMsg{runner.RunFinished{Run: id, Result: &report.Result{Status: "done"}}})
	m = step(m, eventsClosedMsg{})
	m = step(m, checkpointsMsg{run: id, refs: []ckpt.Ref{{Epoch: 4}, {Epoch: 2}}})
	m = step(m, keyMsg("enter"))
	if len(sent) != 0 {
		t.Fatalf("sent %v to an exited runner", sent)
	}
	want := "resnetlab run --resume 2 experiments/zero.toml" // epoch 4 ends the run: nothing to train from it
	if !strings.Contains(m.notice.text, id+" has finished and the runner has exited") || !strings.HasSuffix(m.notice.text, want) {
		t.Fatalf("notice %q, want the command %q", m.notice.text, want)
	}
	// In a grid of several runs the command names the run: --resume alone
	// would resume every run of the spec.
	m = New(Options{Runs: testGrid()[:2], SpecFile: "experiments/zero.toml", Send: func(string, runner.Command) bool { return true }})
	id = m.runs[1].info.ID
	m.runs[1].status, m.closed = stDone, true
	m.resumeFrom(id, ckpt.Ref{Epoch: 3, Step: 7})
	if want := "resnetlab run --resume 3@7 --run " + id + " experiments/zero.toml"; !strings.HasSuffix(m.notice.text, want) {
		t.Fatalf("notice %q, want the command %q", m.notice.text, want)
	}
	// In a world that resnetlab launch started, the command is the launch's.
	m = New(Options{Runs: testGrid()[:1], SpecFile: "w.toml", Relaunch: "resnetlab launch --nproc-per-node 2",
		Send: func(string, runner.Command) bool { return true }})
	id = m.runs[0].info.ID
	m.runs[0].status, m.closed = stDone, true
	m.resumeFrom(id, ckpt.Ref{Epoch: 2, Step: 5})
	if want := "resnetlab launch --nproc-per-node 2 --resume 2@5 w.toml"; !strings.HasSuffix(m.notice.text, want) {
		t.Fatalf("notice %q, want the launch's command %q", m.notice.text, want)
	}
}

// A run interrupted by Ctrl-C is INTERRUPTED (not FAILED) in the header,
// the comparison (its row and the summary) and the log, with its own
// colour.
func TestInterruptedRunIsNotFailed(t *testing.T) {
	grid := testGrid()[:2]
	m := New(Options{Runs: grid})
	m.w, m.h, m.st = 100, 30, newStyles(true)
	for i, info := range grid {
		m = step(m, eventMsg{runner.RunStarted{Info: info}})
		status, err := report.StatusFailed, error(fmt.Errorf("rank 0: loss is NaN"))
		if i == 0 {
			status, err = report.StatusInterrupted, fmt.Errorf("interrupted: %w", context.Canceled)
			m = step(m, eventMsg{runner.CheckpointSaved{Run: info.ID, Epoch: 3, Dir: "ck"}})
		}
		m = step(m, eventMsg{runner.RunFinished{Run: info.ID, Result: &report.Result{Status: status}, Err: err}})
	}
	m.sel = 0
	s := ansi.Strip(m.render())
	if !strings.Contains(s, grid[0].ID+" INTERRUPTED") || strings.Contains(s, grid[0].ID+" FAILED") {
		t.Errorf("header:\n%s", s)
	}
	if !strings.Contains(s, "interrupted: context canceled") || strings.Contains(s, "failed: interrupted") {
		t.Errorf("log should say interrupted, not failed:\n%s", s)
	}
	m = step(m, keyMsg("v"))
	s = ansi.Strip(m.render())
	if !strings.Contains(s, "INTERRUPTED") || !strings.Contains(s, "FAILED") || !strings.Contains(s, "1 failed · 1 interrupted") {
		t.Errorf("compare view should tell the interrupted run from the failed one:\n%s", s)
	}
	col := newStyles(false)
	if statusBadge(stInterrupted, col) == statusBadge(stFailed, col) ||
		ansi.Strip(statusBadge(stInterrupted, col)) != "INTERRUPTED" {
		t.Errorf("INTERRUPTED needs a style of its own: %q vs %q", statusBadge(stInterrupted, col), statusBadge(stFailed, col))
	}
	if got := finishedText(m.runs[0]); !strings.Contains(got, "interrupted · checkpoint of epoch 3 saved · r resumes from it") {
		t.Errorf("notice for the interrupted run: %q", got)
	}
}

// Runs that train at once: the screen stays on the first that started,
// and when it ends it moves on to one still training (until tab is used).
func TestConcurrentRunsSelection(t *testing.T) {
	grid := testGrid()
	m := New(Options{Runs: grid})
	m = step(m, eventMsg{runner.RunStarted{Info: grid[0]}})
	m = step(m, eventMsg{runner.RunStarted{Info: grid[1]}})
	if m.sel != 0 {
		t.Fatalf("a second run started: selection moved to %d, want it on the training run 0", m.sel)
	}
	m = step(m, eventMsg{runner.RunFinished{Run: grid[0].ID, Result: &report.Result{Status: "done"}}})
	if m.sel != 1 {
		t.Fatalf("run 0 ended: selection %d, want run 1 which still trains", m.sel)
	}
	m = step(m, keyMsg("tab")) // the user chooses: no more following
	m = step(m, eventMsg{runner.RunStarted{Info: grid[2]}})
	m = step(m, eventMsg{runner.RunFinished{Run: grid[2].ID, Result: &report.Result{Status: "done"}}})
	if m.sel != 2 {
		t.Fatalf("after tab the selection should stay on run 2, is %d", m.sel)
	}
}

// A log line about the whole grid (Run "") is no run of its own: it goes to
// every run's log and to the notice line.
func TestGridLogIsNoRun(t *testing.T) {
	grid := testGrid()
	m := New(Options{Runs: grid})
	const text = "concurrent = true: 3 runs train at once on the CPU"
	m = step(m, eventMsg{runner.Log{Level: "info", Text: text}})
	if len(m.runs) != len(grid) || m.notice.text != text {
		t.Fatalf("%d runs (want %d), notice %q", len(m.runs), len(grid), m.notice.text)
	}
	for _, r := range m.runs {
		if n := len(r.log.lines); n != 1 || r.log.lines[0].Text != text {
			t.Fatalf("%s log %+v, want the grid line", r.info.ID, r.log.lines)
		}
	}
}

// The picker lists a run's mid-epoch saves beside its epoch ends, newest
// first, and choosing one sends ResumeFrom with its step.
func TestPickerListsMidEpochCheckpoints(t *testing.T) {
	var sent []sentCmd
	saved := []ckpt.Ref{{Epoch: 1}, {Epoch: 2, Step: 3}, {Epoch: 2}}
	m := New(Options{Runs: testGrid()[:1],
		Send:        func(run string, c runner.Command) bool { sent = append(sent, sentCmd{run, c}); return true },
		Checkpoints: func(string) []ckpt.Ref { return saved }})
	id := m.runs[0].info.ID
	m = step(m, eventMsg{runner.RunStarted{Info: m.runs[0].info}})
	msg := m.loadCheckpoints(id)()
	want := []ckpt.Ref{{Epoch: 2}, {Epoch: 2, Step: 3}, {Epoch: 1}}
	if got := msg.(checkpointsMsg).refs; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("picker order %v, want %v", got, want)
	}
	m = step(m, msg)
	m = step(m, keyMsg("down"))
	view := ansi.Strip(m.View().Content)
	if !strings.Contains(view, "▸ epoch 2 step 3 (mid-epoch)") || strings.Count(view, "epoch 2") < 2 || !strings.Contains(view, "epoch 1") {
		t.Fatalf("picker does not show both checkpoints of epoch 2:\n%s", view)
	}
	m = step(m, keyMsg("enter"))
	if len(sent) != 1 || sent[0].cmd != (runner.ResumeFrom{Epoch: 2, Step: 3}) {
		t.Fatalf("sent %v, want ResumeFrom{2 3}", sent)
	}
	if !strings.Contains(m.notice.text, "from epoch 2 step 3") {
		t.Fatalf("notice %q", m.notice.text)
	}
}

// The quit dialog counts a paused run as paused, not as training: with
// one run training and one paused it says both; with only the paused one
// it does not say that a run is still training.
func TestQuitDialogCountsPausedApart(t *testing.T) {
	m := New(Options{Runs: testGrid()[:2]})
	m.w, m.h, m.st = 100, 30, newStyles(true)
	for _, r := range m.runs {
		m = step(m, eventMsg{runner.RunStarted{Info: r.info}})
	}
	m = step(m, eventMsg{runner.Paused{Run: m.runs[1].info.ID, Epoch: 1, Step: 3}})
	dialog := func(m Model) string {
		m = step(m, keyMsg("q"))
		return ansi.Strip(m.render())
	}
	if s := dialog(m); !strings.Contains(s, "1 run still training.") || !strings.Contains(s, "1 run paused") {
		t.Errorf("one training, one paused:\n%s", s)
	}
	m = step(m, eventMsg{runner.Paused{Run: m.runs[0].info.ID, Epoch: 1, Step: 5}})
	if s := dialog(m); strings.Contains(s, "still training") || !strings.Contains(s, "2 runs paused") {
		t.Errorf("both paused: the dialog should not say training:\n%s", s)
	}
}

// A ResumeFrom the runner refuses (it answers with an error line for the
// run) shows its reason on the notice line, not only in the log pane; a
// warning before an accepted resume shows too, and RunStarted then says
// where the run resumed from.
func TestRefusedResumeShowsWhyOnTheNoticeLine(t *testing.T) {
	m := New(Options{Runs: testGrid()[:1], Send: func(string, runner.Command) bool { return true }})
	m.w, m.h, m.st = 120, 30, newStyles(true)
	id := m.runs[0].info.ID
	m = step(m, eventMsg{runner.RunStarted{Info: m.runs[0].info}})
	m = step(m, checkpointsMsg{run: id, refs: []ckpt.Ref{{Epoch: 2}}})
	m = step(m, keyMsg("enter"))
	why := `checkpoint "ckpt/x/model_2.pth": saved with width 8, this run has 16`
	m = step(m, eventMsg{runner.Log{Run: id, Level: runner.LevelError, Text: why}})
	lines := strings.Split(ansi.Strip(m.render()), "\n")
	if notice := lines[len(lines)-2]; !strings.Contains(notice, "resume of "+id+" from epoch 2 refused: "+why[:30]) {
		t.Fatalf("notice line %q, want the refusal's reason", notice)
	}
	m = step(m, eventMsg{runner.Log{Run: id, Level: runner.LevelError, Text: "checkpoint failed: disk full"}})
	if strings.Contains(m.notice.text, "disk full") {
		t.Errorf("an error after the refusal is no answer to the resume: %q", m.notice.text)
	}
	m = step(m, checkpointsMsg{run: id, refs: []ckpt.Ref{{Epoch: 2}}})
	m = step(m, keyMsg("enter"))
	m = step(m, eventMsg{runner.Log{Run: id, Level: runner.LevelWarn, Text: "checkpoint 2 was taken with 9 steps per epoch"}})
	if !strings.Contains(m.notice.text, "9 steps per epoch") || strings.Contains(m.notice.text, "refused") {
		t.Errorf("a warning before the resume: notice %q", m.notice.text)
	}
	m = step(m, eventMsg{runner.RunStarted{Info: m.runs[0].info, StartEpoch: 2}})
	m = step(m, eventMsg{runner.Log{Run: id, Level: runner.LevelError, Text: "later"}})
	if strings.Contains(m.notice.text, "later") {
		t.Errorf("after RunStarted an error is no refusal: %q", m.notice.text)
	}
}

// The command line of the hint after the runner exited is never cut: on
// a narrow screen it wraps at spaces over the notice lines, so it can be
// copied whole, and the screen keeps its height.
func TestResumeHintWrapsWhole(t *testing.T) {
	m := New(Options{Runs: testGrid()[:1], SpecFile: "/tmp/specs/a-long-spec-name.toml",
		Relaunch: "resnetlab launch --nproc-per-node 2 --nnodes 1", Send: func(string, runner.Command) bool { return true }})
	id := m.runs[0].info.ID
	m = step(m, eventMsg{runner.RunStarted{Info: m.runs[0].info}})
	m.runs[0].status, m.closed = stDone, true
	m.resumeFrom(id, ckpt.Ref{Epoch: 2, Step: 5})
	m.w, m.h = 60, 24
	lines := strings.Split(ansi.Strip(m.render()), "\n")
	if len(lines) != 24 {
		t.Fatalf("%d lines, want 24", len(lines))
	}
	var words []string
	for _, l := range lines[len(lines)-1-maxNoticeLines : len(lines)-1] {
		words = append(words, strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "»"))...)
	}
	want := "resnetlab launch --nproc-per-node 2 --nnodes 1 --resume 2@5 /tmp/specs/a-long-spec-name.toml"
	if got := strings.Join(words, " "); !strings.HasSuffix(got, want) || strings.Contains(got, "…") {
		t.Fatalf("notice lines %q, want the whole command %q at their end", got, want)
	}
}

// A finished run whose only checkpoint ends its last epoch: the picker
// says it is saved but nothing would train from it, not that none is.
func TestPickerOfARunWithOnlyItsLastCheckpoint(t *testing.T) {
	m := New(Options{Runs: testGrid()[:1], Send: func(string, runner.Command) bool { return true }})
	id := m.runs[0].info.ID
	m = step(m, eventMsg{runner.RunStarted{Info: m.runs[0].info}})
	m = step(m, eventMsg{runner.RunFinished{Run: id, Result: &report.Result{Status: "done"}}})
	m = step(m, checkpointsMsg{run: id, refs: []ckpt.Ref{{Epoch: m.runs[0].info.Epochs}}})
	s := ansi.Strip(m.picker.View(80, m.st))
	if !strings.Contains(s, "only the end of its last epoch is saved: nothing left to train from it") ||
		strings.Contains(s, "no checkpoints saved") || strings.Contains(s, "trains again") {
		t.Fatalf("picker:\n%s", s)
	}
}
