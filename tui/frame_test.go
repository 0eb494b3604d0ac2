package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"resnetlab/runner"
)

// A flood of runner events draws no screen by itself: View keeps the last
// screen until the frame the first event asked for is due (frameMsg),
// which draws the newest state once; keys and resizes draw at once.
func TestEventsDrawOncePerFrame(t *testing.T) {
	info := testGrid()[0]
	info.StepsPerEpoch = 1000
	m := New(Options{Runs: []runner.RunInfo{info}})
	m.w, m.h, m.st = 200, 50, newStyles(true)
	m = step(m, eventMsg{runner.RunStarted{Info: info}})
	_ = m.View()
	m = step(m, frameMsg{}) // the frame RunStarted asked for
	_ = m.View()
	if m.fr.renders != 1 {
		t.Fatalf("%d screens for the first View and its frame, want 1", m.fr.renders)
	}
	ticks := 0
	for s := 1; s <= 500; s++ {
		nm, cmd := m.Update(eventMsg{runner.StepDone{Run: info.ID, Epoch: 1, Step: s, Steps: 1000, Loss: 1, StepTime: 1e6}})
		m = nm.(Model)
		if cmd != nil && hasFrameTick(cmd) {
			ticks++
		}
		_ = m.View()
	}
	if m.fr.renders != 1 || ticks != 1 {
		t.Fatalf("500 events: %d screens drawn, %d frames asked for; want 1 and 1", m.fr.renders, ticks)
	}
	if s := ansi.Strip(m.View().Content); strings.Contains(s, " 500/1000") {
		t.Fatal("the events were drawn before their frame")
	}
	m = step(m, frameMsg{})
	if s := ansi.Strip(m.View().Content); !strings.Contains(s, " 500/1000") || m.fr.renders != 2 {
		t.Fatalf("the frame after the events (%d screens): want step 500 on the screen:\n%s", m.fr.renders, s)
	}
	_ = m.View()
	if m.fr.renders != 2 {
		t.Fatalf("nothing changed, yet the screen was drawn again (%d)", m.fr.renders)
	}
	m = step(m, eventMsg{runner.StepDone{Run: info.ID, Epoch: 1, Step: 501, Steps: 1000, Loss: 1, StepTime: 1e6}})
	m = step(m, keyMsg("?")) // a key is answered at once, with the events before it
	if s := ansi.Strip(m.View().Content); !strings.Contains(s, " 501/1000") || m.fr.renders != 3 {
		t.Fatalf("after a key (%d screens): want the screen drawn at once:\n%s", m.fr.renders, s)
	}
}

// hasFrameTick reports whether cmd (or a batch of commands) includes the
// frame tick; tea.Tick's command blocks for frameEvery.
func hasFrameTick(cmd tea.Cmd) bool {
	switch msg := cmd().(type) {
	case frameMsg:
		return true
	case tea.BatchMsg:
		for _, c := range msg {
			if c != nil && hasFrameTick(c) {
				return true
			}
		}
	}
	return false
}

// One read takes every event queued behind the first, and says when the
// channel closed behind them.
func TestWaitEventTakesTheQueue(t *testing.T) {
	ch := make(chan runner.Event, 10)
	for i := range 10 {
		ch <- runner.StepDone{Run: "a", Step: i + 1}
	}
	m := New(Options{Events: ch})
	msg, ok := m.waitEvent()().(eventsMsg)
	if !ok || len(msg.evs) != 10 || msg.closed {
		t.Fatalf("got %#v, want the 10 queued events", msg)
	}
	ch <- runner.StepDone{Run: "a", Step: 11}
	close(ch)
	msg, ok = m.waitEvent()().(eventsMsg)
	if !ok || len(msg.evs) != 1 || !msg.closed {
		t.Fatalf("got %#v, want one event and the close", msg)
	}
}
