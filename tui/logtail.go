package tui

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/report"
	"resnetlab/runner"
)

// logKeep bounds the log kept per run; the pane shows the newest lines.
const logKeep = 500

// logTail keeps the run's log lines (from Log events) and shows the newest.
// The runner logs little (warnings, resumes), so the pane also records the
// run's milestones (epochs, checkpoints, pauses) as lines without a time:
// events carry none and the wall clock would make the screen irreproducible.
type logTail struct {
	lines []runner.Log
}

func (l *logTail) Update(ev runner.Event) {
	e, ok := ev.(runner.Log)
	if !ok {
		text := milestone(ev)
		if text == "" {
			return
		}
		e = runner.Log{Run: ev.RunID(), Level: runner.LevelInfo, Text: text}
	}
	l.lines = append(l.lines, e)
	if len(l.lines) > 2*logKeep {
		// Copy rather than reslice so the old backing array can be freed.
		l.lines = append([]runner.Log(nil), l.lines[len(l.lines)-logKeep:]...)
	}
}

// milestone is the log line of an event worth keeping in the run's
// history, "" for the others (steps, memory, chunks).
func milestone(ev runner.Event) string {
	switch e := ev.(type) {
	case runner.RunStarted:
		if from := e.From(); !from.IsZero() {
			return fmt.Sprintf("started from the checkpoint of %s", from.Describe())
		}
		return "started"
	case runner.EpochDone:
		return fmt.Sprintf("epoch %d · loss %.4f · test acc %s · %.1fs · lr %.3g",
			e.Epoch, e.Loss, fmtPct(e.TestAcc), e.Seconds, e.LR)
	case runner.CheckpointSaved:
		return fmt.Sprintf("checkpoint %s → %s", e.Ref().Describe(), e.Dir)
	case runner.Paused:
		return fmt.Sprintf("paused at epoch %d step %d", e.Epoch, e.Step)
	case runner.Resumed:
		return "resumed"
	case runner.RunFinished:
		switch {
		case e.Result != nil && e.Result.Status == report.StatusInterrupted && e.Err != nil:
			return e.Err.Error() // "interrupted: <why>", not a failure
		case e.Err != nil:
			return fmt.Sprintf("failed: %v", e.Err)
		case e.Result != nil && e.Result.Status != "":
			return string(e.Result.Status)
		}
		return "done"
	}
	return ""
}

// View renders a title and the newest lines that fit in h-1 rows. A line
// wider than the pane wraps (indented under the text), so an error is
// read whole, not cut at the pane's edge.
func (l *logTail) View(w, h int, st styles) []string {
	if h <= 0 {
		return nil
	}
	var rows []string
	for i := len(l.lines) - 1; i >= 0 && len(rows) < h-1; i-- {
		rows = append(wrapLog(formatLog(l.lines[i], st), w), rows...)
	}
	if len(rows) > h-1 {
		rows = rows[len(rows)-(h-1):]
	}
	return fitBlock(append([]string{rule("log", w, st)}, rows...), w, h)
}

// logIndent is the width of the time column, under which wrapped lines
// continue.
const logIndent = 9

// wrapLog breaks one formatted log line into rows of at most w cells.
func wrapLog(line string, w int) []string {
	if w <= logIndent+10 || ansi.StringWidth(line) <= w {
		return []string{line}
	}
	prefix, body := ansi.Truncate(line, logIndent, ""), ansi.TruncateLeft(line, logIndent, "")
	rows := strings.Split(ansi.Wrap(body, w-logIndent, " "), "\n")
	for i := range rows {
		rows[i] = strings.Repeat(" ", logIndent) + rows[i]
	}
	rows[0] = prefix + strings.TrimPrefix(rows[0], strings.Repeat(" ", logIndent))
	return rows
}

// formatLog prints "hh:mm:ss level text"; the level is shown only when it
// is not info, and coloured.
func formatLog(e runner.Log, st styles) string {
	ts := "        "
	if !e.Time.IsZero() {
		ts = e.Time.Format("15:04:05")
	}
	lvl := ""
	switch e.Level {
	case runner.LevelWarn:
		lvl = st.warn.Render("WARN") + " "
	case runner.LevelError:
		lvl = st.bad.Render("ERROR") + " "
	}
	return fmt.Sprintf("%s %s%s", st.dim.Render(ts), lvl, oneLine(e.Text))
}

// oneLine makes text from outside (log lines, errors, titles) safe to
// draw: escape sequences are removed whole (replacing only their ESC would
// leave "[1m" on screen) and other control characters (newlines, tabs)
// become spaces, so the text stays one screen line and never moves the cursor.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, ansi.Strip(s))
}
