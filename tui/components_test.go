package tui

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/runner"
)

// The stacked bar gives each category the cells between the rounded
// running sums; checked against a naive count in plain (letter) mode.
func TestStackedBarSegments(t *testing.T) {
	st := newStyles(true)
	c := [6]int64{100, 50, 200, 0, 30, 20} // 400 used
	const w, limit, peak = 40, 800, 600
	bar := stackedBar(c, limit, peak, 0, w, st)
	if got := ansi.StringWidth(bar); got != w {
		t.Fatalf("bar is %d cells, want %d: %q", got, w, bar)
	}
	var cum int64
	prev := 0
	for i, b := range c {
		cum += b
		end := int(math.Round(float64(cum) / limit * w))
		if got, want := strings.Count(bar, string(catGlyph[i])), end-prev; got != want {
			t.Errorf("%s: %d cells, want %d (%q)", catNames[i], got, want, bar)
		}
		prev = end
	}
	runes := []rune(bar)
	if runes[w-1] != '│' {
		t.Errorf("budget marker should end the bar (limit is the scale): %q", bar)
	}
	if p := int(math.Round(peak/float64(limit)*w)) - 1; runes[p] != '┊' {
		t.Errorf("peak marker not at cell %d: %q", p, bar)
	}
}

func TestDominantState(t *testing.T) {
	cases := []struct {
		states [5]int
		want   int
	}{
		{[5]int{5, 1, 0, 0, 0}, stFree},
		{[5]int{0, 0, 3, 3, 0}, stHoldAfterBwd}, // tie: the more active state
		{[5]int{2, 2, 2, 2, 2}, stCompute},
		{[5]int{}, stFree},
		{[5]int{0, 0, 0, 1, 4}, stReadyForReduce},
	}
	for _, c := range cases {
		if got := dominant(runner.ChunkState{States: c.states}); got != c.want {
			t.Errorf("%v: got %s, want %s", c.states, stateNames[got], stateNames[c.want])
		}
	}
	st := newStyles(true)
	if g := glyph(runner.ChunkState{States: [5]int{0, 4}, OnDevice: false}, st); g != "c" {
		t.Errorf("host chunk in COMPUTE: got %q, want lower-case c", g)
	}
}

// ETA after one finished epoch: remaining steps x (epoch seconds / steps).
func TestProgressETA(t *testing.T) {
	var p progressPane
	p.epochs, p.steps = 10, 100
	p.Update(runner.RunStarted{})
	p.Update(runner.StepDone{Epoch: 1, Step: 100, Steps: 100, StepTime: 30 * time.Millisecond})
	p.Update(runner.EpochDone{Epoch: 1, Seconds: 5})
	p.Update(runner.StepDone{Epoch: 2, Step: 50, Steps: 100, StepTime: 30 * time.Millisecond})
	d, ok := p.eta()
	want := time.Duration(850) * 50 * time.Millisecond // 850 steps left at 5s/100
	if !ok || d != want {
		t.Fatalf("eta = %v, %v; want %v", d, ok, want)
	}
	fe, ft := p.fractions()
	if fe != 0.5 || ft != 0.15 {
		t.Errorf("fractions = %v, %v; want 0.5, 0.15", fe, ft)
	}
}

// A resumed run drops the curve points after its start epoch.
func TestCurvesResume(t *testing.T) {
	c := curvesPane{steps: 2}
	for ep := 1; ep <= 3; ep++ {
		for s := 1; s <= 2; s++ {
			c.Update(runner.StepDone{Epoch: ep, Step: s, Steps: 2, Loss: float64(10*ep + s)})
		}
		c.Update(runner.EpochDone{Epoch: ep, TestAcc: float64(ep) / 10})
	}
	c.Update(runner.RunStarted{StartEpoch: 1})
	if len(c.losses) != 2 || len(c.accs) != 1 {
		t.Fatalf("after resume from 1: %d losses, %d accs; want 2, 1", len(c.losses), len(c.accs))
	}
	c.Update(runner.StepDone{Epoch: 2, Step: 1, Steps: 2, Loss: 99})
	if c.losses[2] != 99 || len(c.losses) != 3 {
		t.Errorf("losses = %v", c.losses)
	}
	if b, at := c.best(); at != 1 || b != 0.1 {
		t.Errorf("best = %v @%d", b, at)
	}
}

// PAUSED is shown only once the runner confirms.
func TestPauseNeedsConfirmation(t *testing.T) {
	var sent []runner.Command
	info := runner.RunInfo{ID: "a", Epochs: 2, StepsPerEpoch: 4}
	m := New(Options{Runs: []runner.RunInfo{info}, Send: func(_ string, c runner.Command) bool { sent = append(sent, c); return true }})
	m = step(m, eventMsg{runner.RunStarted{Info: info}})
	m = step(m, keyMsg("p"))
	if len(sent) != 1 || sent[0] != (runner.Pause{}) {
		t.Fatalf("sent %v, want Pause", sent)
	}
	if s := ansi.Strip(m.render()); strings.Contains(s, " PAUSED") || !strings.Contains(s, "PAUSING") {
		t.Fatalf("before Paused event the header must say PAUSING:\n%s", s)
	}
	m = step(m, eventMsg{runner.Paused{Run: "a", Epoch: 1, Step: 2}})
	if s := ansi.Strip(m.render()); !strings.Contains(s, " PAUSED") {
		t.Fatalf("after Paused event the header must say PAUSED:\n%s", s)
	}
	step(m, keyMsg("p"))
	if len(sent) != 2 || sent[1] != (runner.Resume{}) {
		t.Fatalf("sent %v, want Pause, Resume", sent)
	}
}

// p while the runner has not yet answered asks again (the runner answers
// every Pause and Resume): a request that got lost never leaves the run
// PAUSING… or RESUMING… for good.
func TestPendingPauseAsksAgain(t *testing.T) {
	var sent []runner.Command
	info := runner.RunInfo{ID: "a", Epochs: 2, StepsPerEpoch: 4}
	m := New(Options{Runs: []runner.RunInfo{info}, Send: func(_ string, c runner.Command) bool { sent = append(sent, c); return true }})
	m = step(m, eventMsg{runner.RunStarted{Info: info}})
	m = step(step(m, keyMsg("p")), keyMsg("p"))
	if want := []runner.Command{runner.Pause{}, runner.Pause{}}; !slices.Equal(sent, want) {
		t.Fatalf("p twice while pausing sent %v, want %v", sent, want)
	}
	if s := ansi.Strip(m.render()); !strings.Contains(s, "PAUSING") || !strings.Contains(s, "asked again") {
		t.Fatalf("still waiting for the answer, the screen must say so:\n%s", s)
	}
	m = step(m, eventMsg{runner.Paused{Run: "a", Epoch: 1, Step: 2}})
	m = step(m, eventMsg{runner.Paused{Run: "a", Epoch: 1, Step: 2}}) // the second answer
	m = step(step(m, keyMsg("p")), keyMsg("p"))
	if want := []runner.Command{runner.Resume{}, runner.Resume{}}; !slices.Equal(sent[2:], want) {
		t.Fatalf("p twice while paused, then resuming, sent %v, want %v", sent[2:], want)
	}
	m = step(m, eventMsg{runner.Resumed{Run: "a"}})
	if s := ansi.Strip(m.render()); !strings.Contains(s, "RUNNING") {
		t.Fatalf("after Resumed the header must say RUNNING:\n%s", s)
	}
}

// A command the runner's full queue refuses is not lost silently: the
// screen says it was not sent and the run's state stays as it was, so the
// key can be pressed again.
func TestRefusedCommandIsShown(t *testing.T) {
	accept := false
	var sent []runner.Command
	info := runner.RunInfo{ID: "a", Epochs: 2, StepsPerEpoch: 4}
	m := New(Options{Runs: []runner.RunInfo{info}, Send: func(_ string, c runner.Command) bool {
		if accept {
			sent = append(sent, c)
		}
		return accept
	}})
	m = step(m, eventMsg{runner.RunStarted{Info: info}})
	for _, k := range []string{"p", "c"} {
		m = step(m, keyMsg(k))
		s := ansi.Strip(m.render())
		if !strings.Contains(s, "not sent") || strings.Contains(s, "PAUSING") || !strings.Contains(s, "RUNNING") {
			t.Fatalf("%s refused by the runner: the screen must say it was not sent and the run still RUNNING:\n%s", k, s)
		}
	}
	accept = true
	m = step(m, keyMsg("p"))
	if s := ansi.Strip(m.render()); len(sent) != 1 || !strings.Contains(s, "PAUSING") {
		t.Fatalf("p again once the queue takes it: sent %v, screen:\n%s", sent, s)
	}
}

func TestFormatters(t *testing.T) {
	cases := map[string]string{
		fmtBytes(0): "0B", fmtBytes(1023): "1023B", fmtBytes(1536): "1.50K",
		fmtBytes(44_700_000): "42.6M", fmtBytes(2 << 30): "2.00G",
		fmtETA(3725 * time.Second): "1h02m", fmtETA(65 * time.Second): "1m05s",
		fmtStep(7200 * time.Microsecond): "7.20ms", fmtStep(1230 * time.Millisecond): "1.23s",
		fmtRate(1234.4): "1234 img/s", fmtRate(45678): "45.7k img/s",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if got := fitLine("abcdef", 4); got != "abc…" {
		t.Errorf("fitLine cut: %q", got)
	}
	if got := oneLine("a\nb\tc\x1b[2J"); strings.ContainsAny(got, "\n\t\x1b") {
		t.Errorf("oneLine kept control characters: %q", got)
	}
}

// The log pane records the run's milestones, in order, next to the
// runner's own lines; steps and memory reports add nothing.
func TestLogMilestones(t *testing.T) {
	var l logTail
	evs := []runner.Event{
		runner.RunStarted{Info: runner.RunInfo{ID: "a"}, StartEpoch: 3},
		runner.StepDone{Run: "a", Epoch: 4, Step: 1},
		runner.Log{Run: "a", Time: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC), Level: "warn", Text: "slow"},
		runner.EpochDone{Run: "a", Epoch: 4, Loss: 0.5, TestAcc: 0.8125, Seconds: 2.3, LR: 0.001},
		runner.MemoryUsage{Run: "a"},
		runner.Paused{Run: "a", Epoch: 5, Step: 7},
		runner.Resumed{Run: "a"},
		runner.CheckpointSaved{Run: "a", Epoch: 5, Dir: "ck/a"},
		runner.RunFinished{Run: "a", Err: errors.New("accuracy 0.5 below target 0.6")},
	}
	for _, ev := range evs {
		l.Update(ev)
	}
	want := []string{
		"         started from the checkpoint of epoch 3",
		"10:00:00 WARN slow",
		"         epoch 4 · loss 0.5000 · test acc 81.25% · 2.3s · lr 0.001",
		"         paused at epoch 5 step 7",
		"         resumed",
		"         checkpoint epoch 5 → ck/a",
		"         failed: accuracy 0.5 below target 0.6",
	}
	got := l.View(80, 1+len(want), newStyles(true))[1:]
	for i, w := range want {
		if strings.TrimRight(got[i], " ") != w {
			t.Errorf("line %d: %q, want %q", i, strings.TrimRight(got[i], " "), w)
		}
	}
}

// Comparison columns keep a gap even when an id fills its column and the
// next column carries the selection marker (seen live as "…-fp16-1▸gemini").
func TestCompareColumnsKeepAGap(t *testing.T) {
	ids := []string{"low_level_zero-fp16-1", "gemini-fp16-1", "a-very-long-run-identifier-that-is-cut"}
	var runs []*run
	for _, id := range ids {
		runs = append(runs, newRun(runner.RunInfo{ID: id}))
	}
	for sel := range runs {
		for _, w := range []int{40, 80, 160} {
			head := ansi.Strip(compareTable(runs, sel, w, newStyles(true))[0])
			if i := strings.Index(head, "▸"); i > 0 && head[i-1] != ' ' {
				t.Errorf("sel %d width %d: marker glued to the previous column: %q", sel, w, head)
			}
			if w == 160 && !strings.Contains(head, ids[0]+" ") {
				t.Errorf("sel %d: %s should be whole and followed by a gap: %q", sel, ids[0], head)
			}
		}
	}
}
