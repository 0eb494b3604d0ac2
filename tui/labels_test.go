package tui

import (
	"errors"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/report"
	"resnetlab/runner"
)

// A run on the CPU counts ranks, not GPUs; a CUDA run counts GPUs.
func TestHeaderCountsRanksInWhatTheyRunOn(t *testing.T) {
	st := newStyles(true)
	for _, c := range []struct {
		backend string
		ranks   int
		want    string
		not     string
	}{
		{"cpu", 1, "× 1 rank · cpu", "gpu"},
		{"cpu", 2, "× 2 ranks · cpu", "gpu"},
		{"cuda", 2, "× 2 gpus · cuda", "rank"},
	} {
		r := newRun(runner.RunInfo{ID: "x", Plugin: "torch_ddp", Precision: "fp32", WorldSize: c.ranks, Backend: c.backend})
		cfg := ansi.Strip(header{}.View(r, 0, 1, 120, st)[1])
		if !strings.Contains(cfg, c.want) || strings.Contains(cfg, c.not) {
			t.Errorf("%s x %d: header %q, want %q and no %q", c.backend, c.ranks, cfg, c.want, c.not)
		}
	}
}

// Both curves count x in epochs, labelled alike: during epoch 3 (2 done)
// the loss axis ends at the epochs trained so far, the accuracy at the
// last finished epoch.
func TestCurveAxesCountEpochsAlike(t *testing.T) {
	c := curvesPane{steps: 10}
	for ep := 1; ep <= 3; ep++ {
		for s := 1; s <= 10 && (ep < 3 || s <= 6); s++ {
			c.Update(runner.StepDone{Epoch: ep, Step: s, Steps: 10, Loss: 1 / float64(ep*s)})
		}
		if ep < 3 {
			c.Update(runner.EpochDone{Epoch: ep, TestAcc: 0.1 * float64(ep)})
		}
	}
	st := newStyles(true)
	loss := ansi.Strip(strings.Join(c.lossView(40, 8, st), "\n"))
	acc := ansi.Strip(strings.Join(c.accView(40, 8, st), "\n"))
	if !strings.Contains(loss, "└ep0") || !strings.Contains(loss, "ep2.6") {
		t.Errorf("loss axis should run ep0..ep2.6:\n%s", loss)
	}
	if !strings.Contains(acc, "└ep1") || !strings.Contains(acc, "─ep2") {
		t.Errorf("accuracy axis should run ep1..ep2:\n%s", acc)
	}
}

// A finished run re-opened by ResumeFrom is queued again: its bars are
// empty until it starts, not full from the run before.
func TestReopenedRunShowsEmptyBars(t *testing.T) {
	info := runner.RunInfo{ID: "a", Epochs: 2, StepsPerEpoch: 4}
	r := newRun(info)
	r.Update(runner.RunStarted{Info: info})
	r.Update(runner.RunFinished{Run: "a", Result: &report.Result{Status: "done"}})
	if _, total := r.prog.fractions(); total != 1 {
		t.Fatalf("finished run: run bar at %v, want 1", total)
	}
	r.Update(runner.RunQueued{Info: info})
	if r.status != stQueued {
		t.Fatalf("re-opened run is %v, want QUEUED", r.status)
	}
	if fe, ft := r.prog.fractions(); fe != 0 || ft != 0 {
		t.Errorf("re-opened, queued run: bars at %v, %v; want empty", fe, ft)
	}
}

// The help overlay lists the dialogs' keys too (resume picker, quit).
func TestHelpListsDialogKeys(t *testing.T) {
	s := ansi.Strip(helpView(defaultKeys(), 120, newStyles(true)))
	for _, want := range []string{"esc", "enter", "↑/k", "checkpoint, then quit", "quit without checkpoint"} {
		if !strings.Contains(s, want) {
			t.Errorf("help overlay lacks %q:\n%s", want, s)
		}
	}
}

// A check that fails before training (here: no data set) is on screen at
// once, on every run, with the runner's text: not QUEUED runs and a closed
// event stream.
func TestPreflightFailureShownOnEveryRun(t *testing.T) {
	grid := testGrid()
	events := make(chan runner.Event, len(grid))
	why := errors.New("data: cifar10 not found; searched data/*.bin; run `resnetlab data fetch cifar10`")
	for _, info := range grid {
		events <- runner.RunFinished{Run: info.ID, Err: &runner.PreflightError{Err: why}}
	}
	close(events)
	tm, rec := startTUI(t, Options{Runs: grid, Events: events}, 120, 40)
	for i, info := range grid {
		s := waitScreen(t, rec, info.ID+" FAILED", contains(info.ID+" FAILED"))
		if !strings.Contains(s, "resnetlab data fetch cifar10") {
			t.Errorf("run %d: the reason is not on screen:\n%s", i, s)
		}
		if strings.Contains(s, "QUEUED") {
			t.Errorf("run %d: a run still shows QUEUED:\n%s", i, s)
		}
		sendKey(tm, "tab")
	}
}

func TestFmtScale(t *testing.T) {
	for v, want := range map[float64]string{32768: "32768", 32: "32", 0.5: "0.5", 1 << 41: "2.199e+12", 1.5e-5: "1.5e-05"} {
		if got := fmtScale(v); got != want {
			t.Errorf("fmtScale(%v) = %q, want %q", v, got, want)
		}
	}
}
