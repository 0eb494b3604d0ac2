package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/runner"
)

// fitLine truncates s to exactly w cells (with an ellipsis when cut) and pads
// it with spaces, so panes can be placed side by side without wrapping.
func fitLine(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	if pad := w - ansi.StringWidth(s); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// fitBlock returns exactly h lines of exactly w cells: extra lines are
// dropped, missing ones are blank.
func fitBlock(lines []string, w, h int) []string {
	if h <= 0 {
		return nil
	}
	out := make([]string, h)
	for i := range out {
		s := ""
		if i < len(lines) {
			s = lines[i]
		}
		out[i] = fitLine(s, w)
	}
	return out
}

// joinColumns places equally tall blocks side by side with a one-cell gap.
func joinColumns(blocks ...[]string) []string {
	n := 0
	for _, b := range blocks {
		n = max(n, len(b))
	}
	out := make([]string, n)
	for i := range out {
		parts := make([]string, 0, len(blocks))
		for _, b := range blocks {
			if i < len(b) {
				parts = append(parts, b[i])
			}
		}
		out[i] = strings.Join(parts, " ")
	}
	return out
}

// leftRight puts l at the left and r at the right edge of a w-cell line; the
// left part is cut first when both do not fit.
func leftRight(l, r string, w int) string {
	rw := ansi.StringWidth(r)
	if rw >= w {
		return fitLine(r, w)
	}
	return fitLine(l, w-rw-1) + " " + r
}

// fmtBytes prints a byte count with binary units and three significant digits.
func fmtBytes(b int64) string {
	if b < 0 {
		return "-" + fmtBytes(-b)
	}
	if b < 1024 {
		return fmt.Sprintf("%dB", b)
	}
	v := float64(b)
	for _, u := range []string{"K", "M", "G", "T"} {
		v /= 1024
		if v < 1024 || u == "T" {
			return sig3(v) + u
		}
	}
	return "?"
}

// sig3 formats v with three significant digits (v >= 1).
func sig3(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// fmtETA prints a long duration compactly: 1h02m, 12m05s, 45s.
func fmtETA(d time.Duration) string { return runner.FormatDuration(d) }

// fmtStep prints a step time: 7.20ms, 81.0ms, 1.23s.
func fmtStep(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms >= 1000 {
		return sig3(ms/1000) + "s"
	}
	if ms < 1 {
		return fmt.Sprintf("%.0fµs", ms*1000)
	}
	return sig3(ms) + "ms"
}

// fmtRate prints images per second.
func fmtRate(v float64) string {
	if v >= 10000 {
		return sig3(v/1000) + "k img/s"
	}
	return fmt.Sprintf("%.0f img/s", v)
}

// fmtPct prints a fraction as a percentage with two decimals.
func fmtPct(f float64) string { return runner.FormatAccuracy(f) }

// finite reports whether v is a usable number (not NaN or ±Inf).
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// rule is a pane title: "─ title ─────" across w cells.
func rule(title string, w int, st styles) string {
	if w <= 0 {
		return ""
	}
	head := "─ " + title + " "
	n := w - ansi.StringWidth(head)
	if n < 0 {
		return st.title.Render(fitLine(head, w))
	}
	return st.title.Render(head) + st.dim.Render(strings.Repeat("─", n))
}
