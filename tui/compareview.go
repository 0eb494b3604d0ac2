package tui

import (
	"fmt"
	"math"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// compareState is what the keys of the comparison choose: the runs hidden
// from the curves and bars (space, a), the epoch under the cursor
// (left/right; 0 follows the newest epoch) and the page of bars (b).
type compareState struct {
	hidden map[string]bool
	epoch  int
	page   int
}

func (c compareState) shows(r *run) bool { return !c.hidden[r.info.ID] }

// Run markers and colours: the n-th run of the grid draws with the n-th
// of each (cycling), in the curves, the legend and the bars alike; the
// markers differ so that runs stay apart without colour too.
var (
	runMarks  = []rune{'●', '■', '▲', '◆', '▼', '✚', '○', '□'}
	runColors = []string{"#5fafff", "#ff875f", "#87d787", "#d787ff", "#ffd75f", "#5fd7d7", "#ff5f87", "#afafaf"}
)

func runMark(i int) rune { return runMarks[i%len(runMarks)] }

func runStyle(i int, st styles) lipgloss.Style {
	if st.plain {
		return lipgloss.NewStyle()
	}
	return lipgloss.NewStyle().Foreground(lipgloss.Color(runColors[i%len(runColors)]))
}

// compareView lays out the comparison in w x h cells: a title with the
// runs per status, the fact table when the screen is tall enough, a
// legend line per run (with its values at the epoch cursor), the accuracy
// and loss curves of the shown runs overlaid, and bars of what the plugins
// trade, as many pages of them as fit (b turns the page).
func compareView(runs []*run, sel int, cs compareState, w, h int, st styles) []string {
	if h <= 0 {
		return nil
	}
	lines := []string{rule(fmt.Sprintf("compare · %d run%s · %s", len(runs), plural(len(runs)), summaryText(runs)), w, st)}
	if t := compareTable(runs, sel, w, st); h-1-len(t) >= 34 {
		lines = append(lines, t...)
	}
	ep := cursorEpoch(runs, cs)
	rest := h - len(lines)
	leg := compareLegend(runs, sel, cs, ep, w, min(len(runs), max(rest/4, 1)), st)
	rest -= len(leg)
	groups := barGroups(cs)
	perRow := barsPerRow(w)
	gh := 1 + countShown(runs, cs)
	bars := []string{}
	if len(groups) > 0 && rest-gh >= 7 {
		rowsFit := max(min((rest-7)/gh, (len(groups)+perRow-1)/perRow), 1)
		bars = barsView(runs, cs, groups, perRow, rowsFit, w, st)
	}
	curvesH := rest - len(bars)
	lines = append(lines, leg...)
	lines = append(lines, compareCurves(runs, cs, ep, w, curvesH, st)...)
	lines = append(lines, bars...)
	return fitBlock(lines, w, h)
}

// summaryText counts the runs per status: "2 done · 1 running · 3 queued".
func summaryText(runs []*run) string {
	var n [len(statusNames)]int
	for _, r := range runs {
		n[r.status]++
	}
	var parts []string
	for s, k := range n {
		if k > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", k, strings.ToLower(strings.TrimSuffix(status(s).String(), "…"))))
		}
	}
	return strings.Join(parts, " · ")
}

func countShown(runs []*run, cs compareState) int {
	n := 0
	for _, r := range runs {
		if cs.shows(r) {
			n++
		}
	}
	return n
}

// cursorEpoch is the epoch under the cursor: the chosen one, else (and
// when past the end) the newest epoch any shown run has finished.
func cursorEpoch(runs []*run, cs compareState) int {
	n := maxEpochs(runs, cs)
	if cs.epoch <= 0 || cs.epoch > n {
		return n
	}
	return cs.epoch
}

func maxEpochs(runs []*run, cs compareState) int {
	n := 0
	for _, r := range runs {
		if cs.shows(r) {
			n = max(n, len(r.curves.accs))
		}
	}
	return n
}

// epochLoss is the mean training loss of epoch e (1-based) from the steps
// seen, else as the runner recorded it (an epoch before a resume).
func epochLoss(c *curvesPane, e int) (float64, bool) {
	if e <= 0 {
		return 0, false
	}
	sum, k := 0.0, 0
	if c.steps > 0 {
		lo, hi := (e-1)*c.steps, min(e*c.steps, len(c.losses))
		for i := lo; i < hi; i++ {
			if finite(c.losses[i]) {
				sum, k = sum+c.losses[i], k+1
			}
		}
	}
	if k == 0 && e <= len(c.epochLoss) && finite(c.epochLoss[e-1]) {
		return c.epochLoss[e-1], true
	}
	return sum / float64(max(k, 1)), k > 0
}

func accAt(c *curvesPane, e int) (float64, bool) {
	if e <= 0 || e > len(c.accs) || !finite(c.accs[e-1]) {
		return 0, false
	}
	return c.accs[e-1], true
}

// compareLegend is one line per run (a window around the selected one
// when they do not all fit in n lines): the selection, the run's marker in
// its colour (· when hidden), id, status, epochs and its values at the
// epoch cursor.
func compareLegend(runs []*run, sel int, cs compareState, ep, w, n int, st styles) []string {
	idw := 0
	for _, r := range runs {
		idw = max(idw, ansi.StringWidth(r.info.ID))
	}
	idw = min(idw, max(w/3, 8))
	lo := min(max(sel-n/2, 0), max(len(runs)-n, 0))
	hi := min(lo+n, len(runs))
	var out []string
	for i := lo; i < hi; i++ {
		r := runs[i]
		pre, mark := "  ", runStyle(i, st).Render(string(runMark(i)))
		if i == sel {
			pre = st.sel.Render("▸") + " "
		}
		if !cs.shows(r) {
			mark = st.dim.Render("·")
		}
		acc, loss := "--", "--"
		if v, ok := accAt(&r.curves, ep); ok {
			acc = fmtPct(v)
		}
		if v, ok := epochLoss(&r.curves, ep); ok {
			loss = fmt.Sprintf("%.4f", v)
		}
		s := fmt.Sprintf("%s%s %s %s %d/%d", pre, mark, fitLine(r.info.ID, idw),
			padRight(statusBadge(r.status, st), 11), r.prog.doneEpochs, r.info.Epochs)
		s += st.dim.Render(fmt.Sprintf("  @ep%d", ep)) + " acc " + padRight(acc, 7) + " loss " + loss
		if n := resumeNote(r); n != "" {
			s += st.dim.Render("  " + n)
		}
		if !cs.shows(r) {
			s += st.dim.Render("  (hidden)")
		}
		out = append(out, s)
	}
	if hi-lo < len(runs) && len(out) > 0 {
		out[len(out)-1] = leftRight(out[len(out)-1], st.dim.Render(fmt.Sprintf("%d-%d/%d tab", lo+1, hi, len(runs))), w)
	}
	return out
}

// compareCurves overlays the shown runs' test accuracy and training loss,
// side by side when wide enough, with the epoch cursor marked.
func compareCurves(runs []*run, cs compareState, ep, w, h int, st styles) []string {
	if h <= 0 {
		return nil
	}
	if w >= 60 {
		lw := (w - 1) / 2
		return joinColumns(compareAcc(runs, cs, ep, lw, h, st), compareLoss(runs, cs, ep, w-1-lw, h, st))
	}
	top := h / 2
	return append(compareAcc(runs, cs, ep, w, top, st), compareLoss(runs, cs, ep, w, h-top, st)...)
}

func compareAcc(runs []*run, cs compareState, ep, w, h int, st styles) []string {
	n := maxEpochs(runs, cs)
	p := multiPlot{xMin: 1, xMax: float64(max(n, 2)), xLo: "ep1", cursor: math.NaN(), dim: st.dim,
		yFmt: func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }}
	if n > 0 {
		p.xHi, p.cursor = fmt.Sprintf("ep%d", n), float64(ep)
	}
	for i, r := range runs {
		if !cs.shows(r) || len(r.curves.accs) == 0 {
			continue
		}
		k := len(r.curves.accs)
		p.series = append(p.series, series{ys: r.curves.accs, x0: 1, x1: float64(k),
			marks: everyNth(k, max(w/3, 1)), mark: runMark(i), style: runStyle(i, st)})
	}
	title := "test acc"
	if n > 0 {
		title += fmt.Sprintf(" · cursor ep%d (←/→)", ep)
	}
	return withTitle(rule(title, w, st), p.render(w, h-1), w, h)
}

func compareLoss(runs []*run, cs compareState, ep, w, h int, st styles) []string {
	p := multiPlot{xMin: 0, xLo: "ep0", cursor: math.NaN(), dim: st.dim}
	for _, r := range runs {
		if cs.shows(r) && r.curves.steps > 0 {
			p.xMax = max(p.xMax, float64(len(r.curves.losses))/float64(r.curves.steps))
		}
	}
	if p.xMax > 0 {
		p.xHi = "ep" + fmtEpochs(p.xMax)
		if ep > 0 {
			p.cursor = float64(ep)
		}
	}
	for i, r := range runs {
		c := &r.curves
		if !cs.shows(r) || c.steps <= 0 || len(c.losses) == 0 {
			continue
		}
		var marks []int // a marker at the end of every epoch, and at the newest step
		for e := c.steps; e <= len(c.losses); e += c.steps {
			marks = append(marks, e-1)
		}
		marks = thin(append(marks, len(c.losses)-1), max(w/3, 1))
		p.series = append(p.series, series{ys: c.losses, x0: 1 / float64(c.steps),
			x1: float64(len(c.losses)) / float64(c.steps), marks: marks, mark: runMark(i), style: runStyle(i, st)})
	}
	return withTitle(rule("train loss", w, st), p.render(w, h-1), w, h)
}

// everyNth lists at most n of the indices 0..k-1, evenly spread, always
// with the last.
func everyNth(k, n int) []int {
	all := make([]int, k)
	for i := range all {
		all[i] = i
	}
	return thin(all, n)
}

// thin keeps at most n of xs, evenly spread, always with the last.
func thin(xs []int, n int) []int {
	if len(xs) <= n {
		return xs
	}
	out := make([]int, 0, n)
	for j := range n {
		out = append(out, xs[(j+1)*len(xs)/n-1])
	}
	return out
}
