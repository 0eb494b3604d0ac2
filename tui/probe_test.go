package tui

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"
)

// probe wraps the Model under test and records, inside the program's own
// goroutine, the screen after every update and the number of runner events
// handled. Tests read the screen from here because the terminal stream only
// carries the cells that changed.
type probe struct {
	Model
	rec *recorder
}

type recorder struct {
	mu     sync.Mutex
	screen string
	events int
}

func (p probe) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m, cmd := p.Model.Update(msg)
	p.Model = m.(Model)
	screen := ansi.Strip(p.Model.render())
	p.rec.mu.Lock()
	defer p.rec.mu.Unlock()
	switch msg := msg.(type) {
	case eventMsg:
		p.rec.events++
	case eventsMsg:
		p.rec.events += len(msg.evs)
	}
	p.rec.screen = screen
	return p, cmd
}

func (r *recorder) get() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.screen, r.events
}

// startTUI runs the model in teatest with a colourless profile (and plain
// styles from the first frame, so the screen never depends on when the
// profile message arrives).
func startTUI(t *testing.T, o Options, w, h int) (*teatest.TestModel, *recorder) {
	t.Helper()
	m := New(o)
	m.st = newStyles(true)
	rec := &recorder{}
	tm := teatest.NewTestModel(t, probe{Model: m, rec: rec},
		teatest.WithInitialTermSize(w, h),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.ASCII)))
	t.Cleanup(func() { _ = tm.Quit() })
	return tm, rec
}

// waitScreen polls the recorded screen until cond holds or 20s pass (the
// margin is for -race on a loaded machine; a passing wait takes milliseconds).
func waitScreen(t *testing.T, rec *recorder, what string, cond func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, _ := rec.get()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; screen:\n%s", what, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func contains(sub string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, sub) }
}

var stepRe = regexp.MustCompile(`step +(\d+)/(\d+)`)

// stepOnScreen reads the step counter of the progress pane.
func stepOnScreen(t *testing.T, s string) string {
	t.Helper()
	m := stepRe.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no step counter on screen:\n%s", s)
	}
	return m[1]
}

// sendKey types one key into the running program.
func sendKey(tm *teatest.TestModel, k string) { tm.Send(keyMsg(k)) }

// step applies one message to the model directly (no program).
func step(m Model, msg tea.Msg) Model {
	nm, _ := m.Update(msg)
	return nm.(Model)
}

// keyMsg builds the key press a terminal sends for k (a rune or "tab",
// "shift+tab", "enter", "esc", "down", "up", "left", "right", "space").
func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}
