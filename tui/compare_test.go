package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"resnetlab/report"
	"resnetlab/runner"
	"resnetlab/spec"
)

// fourRunFake plays the four plugins of the ColossalAI example: the two
// DDP runs done, gemini done, low_level_zero halted in its third epoch.
// The fake's curves are a function of the step only, so gemini's and
// low_level_zero's are identical where both exist.
func fourRunFake(t *testing.T) *fakeRunner {
	f := newFakeRunner(t, 0)
	g := testGrid()
	fp16 := g[0]
	fp16.ID, fp16.Plugin, fp16.Precision, fp16.CheckpointDir = "torch_ddp_fp16-fp16-1", "torch_ddp_fp16", "fp16", ckptDir("torch_ddp_fp16-fp16-1")
	f.runs = []runner.RunInfo{g[0], fp16, g[1], g[2]}
	f.cmds[fp16.ID] = make(chan runner.Command, 64)
	f.halt = haltAt{run: g[2].ID, epoch: 3, step: 12}
	return f
}

// Golden screens of the comparison with four runs, at the smallest
// supported terminal and a wide one.
func TestCompareGolden(t *testing.T) {
	for _, sz := range []struct {
		name string
		w, h int
	}{{"80x24", 80, 24}, {"200x50", 200, 50}} {
		t.Run(sz.name, func(t *testing.T) {
			f := fourRunFake(t)
			f.start()
			tm, rec := startTUI(t, f.options(), sz.w, sz.h)
			waitHalted(t, f, rec)
			sendKey(tm, "v")
			waitScreen(t, rec, "compare view", contains("compare · 4 runs"))
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(20*time.Second)).(probe)
			teatest.RequireEqualOutput(t, []byte(ansi.Strip(fm.Model.render())))
		})
	}
}

// fourRunModel is the four-run grid fed straight into a Model, in the
// comparison.
func fourRunModel(t *testing.T, w, h int) Model {
	t.Helper()
	m := haltedModel(t, fourRunFake(t))
	m.w, m.h, m.st = w, h, newStyles(true)
	return step(m, keyMsg("v"))
}

// plotMarks counts each run's marker inside the plot areas (the cells
// right of a y axis) of the rendered comparison.
func plotMarks(screen string) map[rune]int {
	n := map[rune]int{}
	for _, l := range strings.Split(screen, "\n") {
		for _, part := range strings.Split(l, "┤")[1:] {
			countMarks(part, n)
		}
		for _, part := range strings.Split(l, "│")[1:] {
			countMarks(part, n)
		}
	}
	return n
}

func countMarks(s string, n map[rune]int) {
	for _, r := range s {
		if r == '┤' || r == '│' {
			return
		}
		for _, m := range runMarks {
			if r == m {
				n[r]++
			}
		}
	}
}

// gemini and low_level_zero train identical curves in the fake: both stay
// visible, each with its own marker at every epoch it has, at both sizes.
func TestIdenticalCurvesBothVisible(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {200, 50}} {
		m := fourRunModel(t, sz[0], sz[1])
		gem, lz := m.runs[2], m.runs[3]
		if gem.info.Plugin != "gemini" || lz.info.Plugin != "low_level_zero" {
			t.Fatalf("grid order: %s %s", gem.info.ID, lz.info.ID)
		}
		for e := range lz.curves.accs {
			if gem.curves.accs[e] != lz.curves.accs[e] {
				t.Fatalf("the curves should be identical for this test: epoch %d %v vs %v", e+1, gem.curves.accs[e], lz.curves.accs[e])
			}
		}
		s := ansi.Strip(m.render())
		marks := plotMarks(s)
		// Accuracy: one marker per epoch; loss: one per finished epoch and the newest step.
		if got, want := marks[runMark(3)], len(lz.curves.accs)*2+1; got < want {
			t.Errorf("%dx%d: low_level_zero's marker %c drawn %d times, want >= %d:\n%s", sz[0], sz[1], runMark(3), got, want, s)
		}
		if got := marks[runMark(2)]; got < 2*len(gem.curves.accs) {
			t.Errorf("%dx%d: gemini's marker %c drawn %d times under low_level_zero's:\n%s", sz[0], sz[1], runMark(2), got, s)
		}
	}
}

// space hides the run under the cursor from the curves and bars, a shows
// every run again; left/right move the epoch cursor and the legend's
// values follow it.
func TestCompareKeys(t *testing.T) {
	m := fourRunModel(t, 120, 40)
	m.sel = 3 // low_level_zero
	before := plotMarks(ansi.Strip(m.render()))[runMark(3)]
	m = step(m, keyMsg("space"))
	s := ansi.Strip(m.render())
	if got := plotMarks(s)[runMark(3)]; before == 0 || got != 0 || !strings.Contains(s, "(hidden)") {
		t.Fatalf("space: marker %c drawn %d times (before %d):\n%s", runMark(3), got, before, s)
	}
	m = step(m, keyMsg("a"))
	if got := plotMarks(ansi.Strip(m.render()))[runMark(3)]; got != before {
		t.Fatalf("a: marker drawn %d times, want %d", got, before)
	}
	if !strings.Contains(ansi.Strip(m.render()), "cursor ep4") {
		t.Fatalf("the cursor should start at the newest epoch:\n%s", ansi.Strip(m.render()))
	}
	m = step(m, keyMsg("left"))
	m = step(m, keyMsg("left"))
	s = ansi.Strip(m.render())
	if !strings.Contains(s, "cursor ep2") || !strings.Contains(s, "@ep2 acc "+fmtPct(fakeAcc(2))) {
		t.Fatalf("left twice: want the cursor at epoch 2 and its accuracy %s:\n%s", fmtPct(fakeAcc(2)), s)
	}
	for range 5 {
		m = step(m, keyMsg("right"))
	}
	if m.cmp.epoch != 0 || !strings.Contains(ansi.Strip(m.render()), "cursor ep4") {
		t.Fatalf("right past the end should follow the newest epoch: %d", m.cmp.epoch)
	}
	m = step(m, keyMsg("esc"))
	if m.compare {
		t.Fatal("esc should leave the comparison")
	}
}

// h2d/d2h: the sum of a Gemini run's chunk moves per rank (the busiest
// rank), 0B for a Gemini run that moved nothing, -- for other plugins.
func TestTransferBars(t *testing.T) {
	h2d := allBarGroups[6]
	value := func(r *run) string {
		_, s, ok := h2d.value(r)
		if !ok {
			return "--"
		}
		return s
	}
	g := newRun(runner.RunInfo{ID: "g", Plugin: spec.PluginGemini})
	g.Update(runner.RunStarted{Info: g.info})
	if got := value(g); got != "0B" {
		t.Errorf("gemini without moves: %q, want 0B", got)
	}
	for _, mv := range []runner.ChunkMoved{{Run: "g", Rank: 0, ToDevice: true, Bytes: 1 << 20},
		{Run: "g", Rank: 1, ToDevice: true, Bytes: 3 << 20}, {Run: "g", Rank: 1, ToDevice: true, Bytes: 1 << 20},
		{Run: "g", Rank: 1, Bytes: 7 << 20}} {
		g.Update(mv)
	}
	if got := value(g); got != "4.00M" {
		t.Errorf("gemini h2d: %q, want 4.00M (rank 1)", got)
	}
	if _, s, _ := allBarGroups[7].value(g); s != "7.00M" {
		t.Errorf("gemini d2h: %q, want 7.00M", s)
	}
	z := newRun(runner.RunInfo{ID: "z", Plugin: "low_level_zero"})
	z.Update(runner.RunStarted{Info: z.info})
	if got := value(z); got != "--" {
		t.Errorf("low_level_zero: %q, want --", got)
	}
}

// The comparison's footer lists the keys that act in it (space, a, the
// epoch cursor, b, the way back), not the dashboard's pause and
// checkpoint; at 80 columns it still ends with help and quit, and once
// every run has finished it offers exit instead of quit.
func TestCompareFooterListsItsKeys(t *testing.T) {
	for _, sz := range [][2]int{{200, 50}, {80, 24}} {
		m := fourRunModel(t, sz[0], sz[1])
		lines := strings.Split(ansi.Strip(m.render()), "\n")
		footer := lines[len(lines)-1]
		for _, want := range []string{"space hide", "a ", "←/→ epoch", "b ", "esc back", "? help", "q quit"} {
			if !strings.Contains(footer, want) {
				t.Errorf("%dx%d: compare footer lacks %q: %q", sz[0], sz[1], want, footer)
			}
		}
		for _, wrong := range []string{"pause", "checkpoint", "v compare"} {
			if strings.Contains(footer, wrong) {
				t.Errorf("%dx%d: compare footer lists the dashboard's %q: %q", sz[0], sz[1], wrong, footer)
			}
		}
	}
	for w, want := range map[int]string{200: "q/enter exit", 80: "q exit"} {
		m := New(Options{Runs: testGrid()[:1]})
		m.w, m.h, m.st = w, 24, newStyles(true)
		m = step(m, eventMsg{runner.RunFinished{Run: m.runs[0].info.ID, Result: &report.Result{Status: "done"}}})
		m = step(m, keyMsg("v"))
		lines := strings.Split(ansi.Strip(m.render()), "\n")
		if footer := lines[len(lines)-1]; !strings.Contains(footer, want) || strings.Contains(footer, "quit") {
			t.Errorf("finished grid at %d columns: compare footer %q, want %q", w, footer, want)
		}
	}
}
