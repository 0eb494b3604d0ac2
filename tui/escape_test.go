package tui

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/runner"
)

// escapeProblem returns "" when every ESC in s starts a complete CSI
// (ESC [ params intermediates final) or OSC (ESC ] ... BEL or ESC \)
// sequence, else a description of the first broken one. It is written
// from ECMA-48 independently of the ansi package the code uses.
func escapeProblem(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			continue
		}
		if i+1 >= len(s) {
			return fmt.Sprintf("ESC at the end (byte %d)", i)
		}
		switch s[i+1] {
		case '[':
			j := i + 2
			for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3f { // parameters
				j++
			}
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f { // intermediates
				j++
			}
			if j >= len(s) || s[j] < 0x40 || s[j] > 0x7e {
				return fmt.Sprintf("unterminated CSI at byte %d: %q", i, s[i:min(j+1, len(s))])
			}
			i = j
		case ']':
			end := strings.IndexAny(s[i+2:], "\a\x1b")
			if end < 0 || (s[i+2+end] == 0x1b && !strings.HasPrefix(s[i+2+end:], "\x1b\\")) {
				return fmt.Sprintf("unterminated OSC at byte %d", i)
			}
			i += 2 + end
		default:
			return fmt.Sprintf("ESC %q at byte %d starts no CSI/OSC", s[i+1], i)
		}
	}
	return ""
}

// sgrRemnant is what is left of an SGR sequence whose ESC was lost or
// replaced: "[1;38;2;135;215;135m" as visible text.
var sgrRemnant = regexp.MustCompile(`\[[0-9;:]*m`)

// checkScreen asserts a rendered screen is h lines of w cells, with
// well-formed escape sequences and no visible remnants of one.
func checkScreen(t *testing.T, what, s string, w, h int) {
	t.Helper()
	if p := escapeProblem(s); p != "" {
		t.Fatalf("%s: %s", what, p)
	}
	lines := strings.Split(s, "\n")
	if len(lines) != h {
		t.Fatalf("%s: %d lines, want %d", what, len(lines), h)
	}
	for i, l := range lines {
		plain := ansi.Strip(l)
		if got := ansi.StringWidth(l); got != w {
			t.Fatalf("%s: line %d is %d cells, want %d: %q", what, i, got, w, plain)
		}
		if r := sgrRemnant.FindString(plain); r != "" {
			t.Fatalf("%s: line %d shows an escape remnant %q: %q", what, i, r, plain)
		}
		if strings.ContainsFunc(plain, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("%s: line %d has a control character: %q", what, i, plain)
		}
	}
}

// The validator itself: it must reject the broken forms it looks for.
func TestEscapeProblem(t *testing.T) {
	good := []string{"", "abc", "\x1b[1;38;2;1;2;3mx\x1b[m", "\x1b]8;;http://x\x1b\\y\x1b]8;;\a", "\x1b[?25l"}
	bad := []string{"\x1b", "a\x1b[1;3", "\x1b[38;2;1\x1b[m", "\x1bX", "\x1b]0;title"}
	for _, s := range good {
		if p := escapeProblem(s); p != "" {
			t.Errorf("%q rejected: %s", s, p)
		}
	}
	for _, s := range bad {
		if escapeProblem(s) == "" {
			t.Errorf("%q accepted", s)
		}
	}
}

// A long, styled notice (the checkpoint toast) in colour at narrow widths:
// the notice line is cut to the width with its styling intact, and the
// visible text starts with the confirmation mark, not escape remnants.
func TestNarrowToastKeepsEscapesWhole(t *testing.T) {
	m := New(Options{Title: "smoke experiments/smoke.toml", Runs: testGrid()})
	m = step(m, eventMsg{runner.RunStarted{Info: m.runs[0].info}})
	m = step(m, eventMsg{runner.CheckpointSaved{Run: "torch_ddp-fp32-1", Epoch: 2,
		Dir:   "./checkpoint/smoke/torch_ddp-fp32-1/a/very/long/path/that/never/fits",
		Files: []string{"model_2.pth", "optimizer_2.pth", "lr_scheduler_2.pth"}}})
	for _, w := range []int{1, 3, 10, 24, 40, 61, 80, 100} {
		m.w, m.h = w, 24
		s := m.render()
		checkScreen(t, fmt.Sprintf("width %d", w), s, w, 24)
		if w < 40 {
			continue
		}
		line := ansi.Strip(strings.Split(s, "\n")[22])
		if !strings.HasPrefix(line, "» ✓ checkpoint saved: ") || !strings.HasSuffix(line, "…") {
			t.Errorf("width %d: notice line %q", w, line)
		}
		if w >= 80 && !strings.Contains(line, "torch_ddp-fp32-1 epoch 2 → ./checkpoint/smoke/") {
			t.Errorf("width %d: notice should name the run, epoch and directory: %q", w, line)
		}
	}
}

// Text from outside (log lines, error messages, the title) may carry its
// own escapes and newlines: they are dropped whole, never half shown.
func TestForeignEscapesAreDropped(t *testing.T) {
	m := New(Options{Title: "t\x1b[31mred\x1b[0m", Runs: testGrid()})
	id := m.runs[0].info.ID
	m = step(m, eventMsg{runner.RunStarted{Info: m.runs[0].info}})
	m = step(m, eventMsg{runner.Log{Run: id, Time: time.Unix(0, 0), Level: "warn", Text: "\x1b[1mbold\x1b[m\nnext\tline"}})
	m = step(m, eventMsg{runner.RunFinished{Run: id, Err: errors.New("boom \x1b[33myellow\x1b[0m\nsecond line")}})
	m.w, m.h = 100, 30
	s := m.render()
	checkScreen(t, "foreign escapes", s, 100, 30)
	plain := ansi.Strip(s)
	for _, want := range []string{"tred", "bold next line", "failed: boom yellow second line"} {
		if !strings.Contains(plain, want) {
			t.Errorf("screen lacks %q:\n%s", want, plain)
		}
	}
}
