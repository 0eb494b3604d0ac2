package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"resnetlab/report"
	"resnetlab/runner"
)

// pacedFake is a fake runner that emits a step every few milliseconds, so a
// test can act while a run trains.
func pacedFake(t *testing.T) *fakeRunner {
	f := newFakeRunner(t, 3*time.Millisecond)
	for i := range f.runs {
		f.runs[i].StepsPerEpoch = 50
	}
	return f
}

func hasCmd(cmds []sentCmd, run string, c runner.Command) bool {
	return slices.Contains(cmds, sentCmd{run, c})
}

// p pauses: once the runner confirms (PAUSED on screen) the step counter
// stays put; p again resumes and it moves on.
func TestPauseStopsProgress(t *testing.T) {
	f := pacedFake(t)
	f.start()
	tm, rec := startTUI(t, f.options(), 100, 30)
	waitScreen(t, rec, "training", func(s string) bool { return strings.Contains(s, "RUNNING") && stepRe.MatchString(s) })
	sendKey(tm, "p")
	s := waitScreen(t, rec, "PAUSED", contains(" PAUSED"))
	at := stepOnScreen(t, s)
	time.Sleep(150 * time.Millisecond) // ~50 steps' worth of time
	s, _ = rec.get()
	if got := stepOnScreen(t, s); got != at || !strings.Contains(s, " PAUSED") {
		t.Fatalf("paused at step %s but the screen shows step %s:\n%s", at, got, s)
	}
	if !hasCmd(f.commands(), "torch_ddp-fp32-1", runner.Pause{}) {
		t.Fatalf("Pause not sent: %v", f.commands())
	}
	sendKey(tm, "p")
	waitScreen(t, rec, "progress after resume", func(s string) bool {
		m := stepRe.FindStringSubmatch(s)
		return m != nil && m[1] != at && strings.Contains(s, "RUNNING")
	})
	if !hasCmd(f.commands(), "torch_ddp-fp32-1", runner.Resume{}) {
		t.Fatalf("Resume not sent: %v", f.commands())
	}
}

// c makes the runner write the three checkpoint files; the screen confirms
// when CheckpointSaved arrives.
func TestCheckpointNow(t *testing.T) {
	f := pacedFake(t)
	f.every = 0 // no periodic checkpoints: every file comes from the key
	f.start()
	tm, rec := startTUI(t, f.options(), 80, 24)
	waitScreen(t, rec, "training", contains("RUNNING"))
	sendKey(tm, "c")
	s := waitScreen(t, rec, "confirmation", contains("checkpoint saved: torch_ddp-fp32-1 epoch"))
	if !hasCmd(f.commands(), "torch_ddp-fp32-1", runner.CheckpointNow{}) {
		t.Fatalf("CheckpointNow not sent: %v", f.commands())
	}
	dir := filepath.Join(f.root, ckptDir("torch_ddp-fp32-1"))
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	eps := f.Checkpoints("torch_ddp-fp32-1")
	if len(eps) != 1 {
		t.Fatalf("want one checkpoint epoch, have %v (files %v)", eps, got)
	}
	e := eps[0].Epoch
	want := []string{"lr_scheduler_" + strconv.Itoa(e) + ".pth", "model_" + strconv.Itoa(e) + ".pth", "optimizer_" + strconv.Itoa(e) + ".pth"}
	if !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	if !strings.Contains(s, "epoch "+strconv.Itoa(e)+" → ckpt/torch_ddp-fp32-1") {
		t.Errorf("confirmation does not name epoch %d and the directory:\n%s", e, s)
	}
}

// r lists the run's checkpoints newest first; down + enter picks the
// older one and sends ResumeFrom with it; the runner restarts from there.
func TestResumeFromPicker(t *testing.T) {
	f := pacedFake(t)
	f.every = 1
	f.start()
	tm, rec := startTUI(t, f.options(), 80, 24)
	waitScreen(t, rec, "epoch 3", contains("epoch 3/4"))
	sendKey(tm, "p") // hold the run still while choosing
	waitScreen(t, rec, "PAUSED", contains(" PAUSED"))
	sendKey(tm, "r")
	s := waitScreen(t, rec, "picker", contains("Resume torch_ddp-fp32-1 from checkpoint"))
	i2, i1 := strings.Index(s, "▸ epoch 2"), strings.Index(s, "  epoch 1")
	if i2 < 0 || i1 < 0 || i1 < i2 {
		t.Fatalf("picker should list epoch 2 (selected) above epoch 1:\n%s", s)
	}
	sendKey(tm, "down")
	waitScreen(t, rec, "cursor on epoch 1", contains("▸ epoch 1"))
	sendKey(tm, "enter")
	waitScreen(t, rec, "resume notice", contains("torch_ddp-fp32-1 resumed from epoch 1"))
	if !hasCmd(f.commands(), "torch_ddp-fp32-1", runner.ResumeFrom{Epoch: 1}) {
		t.Fatalf("ResumeFrom{1} not sent: %v", f.commands())
	}
	waitScreen(t, rec, "epoch 2 again", contains("epoch 2/4"))
}

// v shows one column per run of the grid, with their facts; v again leaves.
func TestCompareView(t *testing.T) {
	f := goldenFake(t)
	f.start()
	tm, rec := startTUI(t, f.options(), 100, 30)
	waitHalted(t, f, rec)
	sendKey(tm, "v")
	s := waitScreen(t, rec, "compare view", contains("compare · 3 runs"))
	for _, r := range f.runs {
		if !strings.Contains(s, r.ID) {
			t.Errorf("compare view lacks run %s", r.ID)
		}
	}
	for _, row := range []string{"test acc", "train loss", "peak device/rank", "peak host/rank", "images/s", "time/epoch"} {
		if !strings.Contains(s, row) {
			t.Errorf("compare view lacks row %q", row)
		}
	}
	if !strings.Contains(s, "DONE") || !strings.Contains(s, "QUEUED") || !strings.Contains(s, fmtPct(fakeAcc(4))) {
		t.Errorf("compare view should show the finished run's status and accuracy:\n%s", s)
	}
	sendKey(tm, "v")
	waitScreen(t, rec, "dashboard", func(s string) bool { return !strings.Contains(s, "compare ·") })
}

// tab and shift+tab move the header between the runs of the grid.
func TestTabSwitchesRun(t *testing.T) {
	tm, rec := haltedTUI(t, 80, 24)
	for _, k := range []struct{ key, want string }{
		{"tab", "run 3/3 low_level_zero-fp16-2 QUEUED"},
		{"tab", "run 1/3 torch_ddp-fp32-1 DONE"},
		{"shift+tab", "run 3/3 low_level_zero-fp16-2"},
		{"shift+tab", "run 2/3 gemini-fp16-2 RUNNING"},
	} {
		sendKey(tm, k.key)
		waitScreen(t, rec, k.want, contains(k.want))
	}
}

// q asks first: esc keeps running and sends nothing; q then y stops the
// running run with a checkpoint and the program ends once it has stopped.
func TestQuitConfirm(t *testing.T) {
	f := pacedFake(t)
	f.every = 0
	f.start()
	tm, rec := startTUI(t, f.options(), 80, 24)
	waitScreen(t, rec, "training", contains("RUNNING"))
	sendKey(tm, "q")
	waitScreen(t, rec, "dialog", contains("Quit resnetlab?"))
	sendKey(tm, "esc")
	waitScreen(t, rec, "dialog closed", func(s string) bool { return !strings.Contains(s, "Quit resnetlab?") })
	if n := len(f.commands()); n != 0 {
		t.Fatalf("cancelled quit sent %v", f.commands())
	}
	sendKey(tm, "q")
	waitScreen(t, rec, "dialog", contains("1 run still training"))
	sendKey(tm, "y")
	tm.WaitFinished(t, teatest.WithFinalTimeout(20*time.Second))
	if got := f.commands(); len(got) != 1 || got[0] != (sentCmd{"", runner.Quit{Checkpoint: true}}) {
		t.Fatalf("want Quit{Checkpoint: true} sent once to the grid, sent %v", got)
	}
	if eps := f.Checkpoints("torch_ddp-fp32-1"); len(eps) != 1 {
		t.Fatalf("quitting with y should leave one checkpoint, have %v", eps)
	}
	if s, _ := rec.get(); !strings.Contains(s, "torch_ddp-fp32-1 INTERRUPTED") {
		t.Errorf("last screen should show the run interrupted:\n%s", s)
	}
	for _, info := range f.runs[1:] {
		if eps := f.Checkpoints(info.ID); len(eps) != 0 {
			t.Errorf("%s never started, yet has checkpoints %v", info.ID, eps)
		}
	}
}

// n quits without a checkpoint.
func TestQuitWithoutCheckpoint(t *testing.T) {
	f := pacedFake(t)
	f.every = 0
	f.start()
	tm, rec := startTUI(t, f.options(), 80, 24)
	waitScreen(t, rec, "training", contains("RUNNING"))
	sendKey(tm, "q")
	waitScreen(t, rec, "dialog", contains("Quit resnetlab?"))
	sendKey(tm, "n")
	tm.WaitFinished(t, teatest.WithFinalTimeout(20*time.Second))
	if got := f.commands(); len(got) != 1 || got[0] != (sentCmd{"", runner.Quit{}}) {
		t.Fatalf("want Quit{} sent once to the grid, sent %v", got)
	}
	if eps := f.Checkpoints("torch_ddp-fp32-1"); len(eps) != 0 {
		t.Fatalf("quitting with n wrote checkpoints %v", eps)
	}
}

// helpOnFinishedGrid plays a fake grid to its end on a w x h screen and
// opens the help overlay: the start that the help tests share. It returns
// the screen with the overlay open.
func helpOnFinishedGrid(t *testing.T, w, h int) (*fakeRunner, *teatest.TestModel, *recorder, string) {
	t.Helper()
	f := newFakeRunner(t, 0)
	f.start()
	tm, rec := startTUI(t, f.options(), w, h)
	waitScreen(t, rec, "all finished", contains("all runs finished"))
	sendKey(tm, "?")
	return f, tm, rec, waitScreen(t, rec, "help", contains("resnetlab keys"))
}

// When every run has finished, the screen says so and a key ends the program.
func TestAllFinishedThenKey(t *testing.T) {
	f, tm, rec, _ := helpOnFinishedGrid(t, 80, 24)
	sendKey(tm, "x") // any key closes help
	waitScreen(t, rec, "help closed", func(s string) bool { return !strings.Contains(s, "resnetlab keys") })
	sendKey(tm, "enter")
	tm.WaitFinished(t, teatest.WithFinalTimeout(20*time.Second))
	if n := len(f.commands()); n != 0 {
		t.Errorf("finished grid: nothing to send, sent %v", f.commands())
	}
}

// The runner closes its event stream after the last run: the notice keeps
// saying that all runs finished. A stream closed mid-run says so instead.
func TestStreamClosedNotice(t *testing.T) {
	finished := func(m Model, i int) Model {
		return step(m, eventMsg{runner.RunFinished{Run: m.runs[i].info.ID, Result: &report.Result{Status: "done"}}})
	}
	m := New(Options{Runs: testGrid()[:2]})
	m = finished(finished(m, 0), 1)
	m = step(m, eventsClosedMsg{})
	if !strings.Contains(m.notice.text, "all runs finished") {
		t.Errorf("after the last run and the close: notice %q", m.notice.text)
	}
	m = New(Options{Runs: testGrid()[:2]})
	m = step(finished(m, 0), eventsClosedMsg{})
	if m.notice.text != "event stream closed" || !m.allFinished() {
		t.Errorf("closed mid-grid: notice %q, all finished %v", m.notice.text, m.allFinished())
	}
}

// v on a grid wider than the screen: tab scrolls the comparison so that,
// one window after another, every run of the grid is shown.
func TestCompareShowsEveryRunOfABigGrid(t *testing.T) {
	var infos []runner.RunInfo
	for i := range 7 {
		infos = append(infos, runner.RunInfo{ID: fmt.Sprintf("gemini-fp16-%d", i+1), Plugin: "gemini", Epochs: 4})
	}
	m := New(Options{Runs: infos})
	m.w, m.h, m.st = 80, 24, newStyles(true)
	m = step(m, keyMsg("v"))
	seen := map[string]bool{}
	for range infos {
		s := ansi.Strip(m.render())
		if !strings.Contains(s, "compare · 7 runs") || !strings.Contains(s, "/7 tab") {
			t.Fatalf("not the scrolling comparison:\n%s", s)
		}
		for _, in := range infos {
			if strings.Contains(s, in.ID+" ") {
				seen[in.ID] = true
			}
		}
		m = step(m, keyMsg("tab"))
	}
	for _, in := range infos {
		if !seen[in.ID] {
			t.Errorf("run %s never shown while tabbing through the comparison", in.ID)
		}
	}
}

// The help overlay tells what Ctrl-C does: the runs still training stop
// and checkpoint first, as cmd/resnetlab's TestUIQuitRule checks of the
// real runner (it used to say "no checkpoint").
func TestHelpSaysCtrlCCheckpoints(t *testing.T) {
	_, tm, _, s := helpOnFinishedGrid(t, 200, 50)
	var line string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "ctrl+c") {
			line = l
		}
	}
	if !strings.Contains(line, "quit now (runs checkpoint and stop)") || strings.Contains(line, "no checkpoint") {
		t.Fatalf("help's ctrl+c line %q, want it to say the runs checkpoint; screen:\n%s", line, s)
	}
	sendKey(tm, "x")
	sendKey(tm, "enter")
	tm.WaitFinished(t, teatest.WithFinalTimeout(20*time.Second))
}
