package tui

import (
	"fmt"
	"regexp"
	"resnetlab/ckpt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"
)

// goldenHalt is where the fake stops for the golden screens: the first run
// done, the gemini run in its third epoch, the last run queued.
var goldenHalt = haltAt{run: "gemini-fp16-2", epoch: 3, step: 12}

// goldenFake is a fake runner that halts at goldenHalt (not started).
func goldenFake(t *testing.T) *fakeRunner {
	t.Helper()
	f := newFakeRunner(t, 0)
	f.halt = goldenHalt
	return f
}

// populatedModel feeds the fake's events straight into a Model (no
// program) until the fake halts.
func populatedModel(t *testing.T) Model {
	t.Helper()
	return haltedModel(t, goldenFake(t))
}

// haltedModel starts f and feeds its events straight into a new Model (no
// program) until f halts.
func haltedModel(t *testing.T, f *fakeRunner) Model {
	t.Helper()
	f.start()
	m := New(f.options())
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-f.out:
			m = step(m, eventMsg{ev})
		case <-time.After(20 * time.Millisecond):
			if _, halted := f.state(); halted {
				return m
			}
		case <-deadline:
			t.Fatal("fake runner did not halt")
		}
	}
}

// Every screen, at every size, is exactly h lines of exactly w cells (no
// wrapping, whatever the pane or dialog), and every cut leaves the escape
// sequences of the coloured styles whole.
func TestEveryLineFits(t *testing.T) {
	base := populatedModel(t)
	ws := []int{1, 2, 7, 20, 39, 40, 56, 69, 70, 80, 119, 120, 160, 250}
	hs := []int{1, 2, 4, 8, 12, 24, 29, 30, 48, 80}
	views := map[string]func(Model) Model{
		"dashboard": func(m Model) Model { return m },
		"other run": func(m Model) Model { m.sel = 0; return m },
		"queued":    func(m Model) Model { m.sel = 2; return m },
		"compare":   func(m Model) Model { m.compare = true; return m },
		"help":      func(m Model) Model { m.overlay = helpOverlay; return m },
		"quit":      func(m Model) Model { m.overlay = quitOverlay; return m },
		"picker": func(m Model) Model {
			m.overlay, m.picker = pickerOverlay, resumePicker{run: "x", refs: []ckpt.Ref{{Epoch: 9}, {Epoch: 8}, {Epoch: 8, Step: 120}, {Epoch: 7}, {Epoch: 6}, {Epoch: 5}, {Epoch: 4}, {Epoch: 3}, {Epoch: 2}, {Epoch: 1}}}
			return m
		},
		"picker of a finished run": func(m Model) Model {
			m.overlay, m.picker = pickerOverlay, resumePicker{run: "x", refs: []ckpt.Ref{{Epoch: 4}, {Epoch: 3, Step: 7}}, finished: stInterrupted}
			return m
		},
	}
	for name, view := range views {
		for _, plain := range []bool{true, false} {
			for _, w := range ws {
				for _, h := range hs {
					m := view(base)
					m.w, m.h, m.st = w, h, newStyles(plain)
					checkScreen(t, fmt.Sprintf("%s %dx%d plain=%v", name, w, h, plain), m.render(), w, h)
				}
			}
		}
	}
}

// Golden screens at the smallest supported and a wide terminal.
func TestGolden(t *testing.T) {
	for _, sz := range []struct {
		name string
		w, h int
	}{{"80x24", 80, 24}, {"160x48", 160, 48}} {
		t.Run(sz.name, func(t *testing.T) {
			tm, _ := haltedTUI(t, sz.w, sz.h)
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(20*time.Second)).(probe)
			teatest.RequireEqualOutput(t, []byte(ansi.Strip(fm.Model.render())))
		})
	}
}

// waitHalted waits until the fake has halted and the model has handled
// every event it sent.
func waitHalted(t *testing.T, f *fakeRunner, rec *recorder) {
	t.Helper()
	waitScreen(t, rec, "the fake runner to halt", func(string) bool {
		n, halted := f.state()
		_, seen := rec.get()
		return halted && seen == n
	})
}

// haltedTUI starts the program at w x h on goldenFake and waits until it
// has shown everything the fake sent before halting.
func haltedTUI(t *testing.T, w, h int) (*teatest.TestModel, *recorder) {
	t.Helper()
	f := goldenFake(t)
	f.start()
	tm, rec := startTUI(t, f.options(), w, h)
	waitHalted(t, f, rec)
	return tm, rec
}

// A WindowSizeMsg re-lays the screen out: the wide layout adds the memory
// table, a narrow one drops it, and the line count follows the height.
func TestResize(t *testing.T) {
	tm, rec := haltedTUI(t, 80, 24)
	table := "param   grad  optim" // header of the per-category table (wide only)
	s, _ := rec.get()
	checkSize(t, s, 80, 24)
	if strings.Contains(s, table) {
		t.Fatalf("80x24 should not show the memory table:\n%s", s)
	}
	tm.Send(tea.WindowSizeMsg{Width: 160, Height: 48})
	s = waitScreen(t, rec, "wide layout", contains(table))
	checkSize(t, s, 160, 48)
	tm.Send(tea.WindowSizeMsg{Width: 100, Height: 30})
	s = waitScreen(t, rec, "narrow layout", func(s string) bool { return !strings.Contains(s, table) })
	checkSize(t, s, 100, 30)
}

func checkSize(t *testing.T, s string, w, h int) {
	t.Helper()
	lines := strings.Split(s, "\n")
	if len(lines) != h {
		t.Fatalf("want %d lines, got %d", h, len(lines))
	}
	for i, l := range lines {
		if ansi.StringWidth(l) != w {
			t.Fatalf("line %d is %d cells, want %d: %q", i, ansi.StringWidth(l), w, l)
		}
	}
}

// At 80x24 the help overlay shows every key with its whole description
// (the groups wrap into rows instead of being cut) and the footer keeps
// the help and quit keys.
func TestHelpAndFooterAt80(t *testing.T) {
	m := populatedModel(t)
	m.w, m.h, m.st = 80, 24, newStyles(true)
	footer := strings.Split(m.render(), "\n")[23]
	for _, want := range []string{"? help", "q quit", "v compare", "p pause"} {
		if !strings.Contains(footer, want) {
			t.Errorf("footer lacks %q: %q", want, footer)
		}
	}
	m.overlay = helpOverlay
	s := m.render()
	for _, g := range m.keys.FullHelp() {
		for _, b := range g {
			re := regexp.MustCompile(regexp.QuoteMeta(b.Help().Key) + ` +` + regexp.QuoteMeta(b.Help().Desc))
			if !re.MatchString(s) {
				t.Errorf("help lacks %q %q:\n%s", b.Help().Key, b.Help().Desc, ansi.Strip(s))
			}
		}
	}
	for _, l := range strings.Split(ansi.Strip(s), "\n") {
		if in := strings.Index(l, "│ "); in >= 0 && strings.Contains(l[in:], "…") {
			t.Errorf("help overlay cut a line: %q", l)
		}
	}
}
