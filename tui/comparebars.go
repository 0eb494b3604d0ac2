package tui

import (
	"fmt"
	"math"
	"strings"

	"charm.land/lipgloss/v2"
)

// barGroup is one fact the plugins trade, drawn as one bar per shown run,
// all scaled to the largest. value's ok is false when the run has no such
// number (yet): the bar is then "--".
type barGroup struct {
	title string
	value func(r *run) (v float64, text string, ok bool)
	// stack, when set, splits the bar by memory category (params … data);
	// ok is false when the events carried no breakdown (the total only).
	stack func(r *run) (c [6]int64, ok bool)
}

// barGroupMinW is the narrowest a group may be: marker, bar, value.
const barGroupMinW = 19

var allBarGroups = []barGroup{
	{title: "peak device/rank", value: func(r *run) (float64, string, bool) { return bytesFact(peakOf(r, true)) },
		stack: func(r *run) ([6]int64, bool) { c := r.cmp.worst().dev; return c, total(c) > 0 }},
	{title: "peak host/rank", value: func(r *run) (float64, string, bool) { return bytesFact(peakOf(r, false)) }},
	{title: "images/s", value: func(r *run) (float64, string, bool) {
		v, ok := imagesPerSecOf(r)
		return v, fmt.Sprintf("%.0f", v), ok
	}},
	{title: "time/epoch", value: func(r *run) (float64, string, bool) {
		v, ok := epochSecsOf(r)
		return v, fmt.Sprintf("%.1fs", v), ok
	}},
	{title: "final acc", value: func(r *run) (float64, string, bool) { v, ok := finalAccOf(r); return v, fmtPct(v), ok }},
	{title: "best acc", value: func(r *run) (float64, string, bool) { v, ok := bestAccOf(r); return v, fmtPct(v), ok }},
	{title: "h2d/rank", value: func(r *run) (float64, string, bool) { w := r.cmp.worst(); return xferFact(w.h2d, w.xfer) }},
	{title: "d2h/rank", value: func(r *run) (float64, string, bool) { w := r.cmp.worst(); return xferFact(w.d2h, w.xfer) }},
}

func bytesFact(b int64) (float64, string, bool) { return float64(b), fmtBytes(b), b > 0 }

// xferFact is a traffic volume: 0 is a real value when it is known.
func xferFact(b int64, known bool) (float64, string, bool) { return float64(b), fmtBytes(b), known }

// barsPerRow is how many groups fit side by side in w cells.
func barsPerRow(w int) int { return min(max(w/barGroupMinW, 1), len(allBarGroups)) }

// barGroups is every group, in the order of allBarGroups, starting at the
// page chosen with b.
func barGroups(cs compareState) []barGroup {
	n := len(allBarGroups)
	out := make([]barGroup, 0, n)
	for i := range n {
		out = append(out, allBarGroups[(i+cs.page)%n])
	}
	return out
}

// barsView draws the groups perRow side by side, in at most rows rows; a
// last line says how to see the groups that did not fit, and names the
// categories of the stacked bars.
func barsView(runs []*run, cs compareState, groups []barGroup, perRow, rows, w int, st styles) []string {
	gw := (w - (perRow - 1)) / perRow
	var out []string
	shown := min(len(groups), perRow*rows)
	for at := 0; at < shown; at += perRow {
		var blocks [][]string
		for _, g := range groups[at:min(at+perRow, shown)] {
			blocks = append(blocks, barGroupView(runs, cs, g, gw, st))
		}
		out = append(out, joinColumns(blocks...)...)
	}
	foot := ""
	if shown < len(groups) {
		foot = st.dim.Render(fmt.Sprintf("%d of %d bar groups · b: next row", shown, len(groups))) + "  "
	}
	if w >= 60 {
		items := make([]string, 0, 7)
		for i, n := range catShort {
			g := "█"
			if st.plain {
				g = string(catGlyph[i])
			}
			items = append(items, st.cat[i].Render(g)+" "+n)
		}
		items = append(items, st.dim.Render("░")+" above the largest report")
		foot += strings.Join(items, " ")
	}
	if foot != "" {
		out = append(out, foot)
	}
	return out
}

// barGroupView is a group's title and one bar per shown run.
func barGroupView(runs []*run, cs compareState, g barGroup, w int, st styles) []string {
	const vw = 7
	bw := max(w-vw-3, 1)
	var top float64
	for _, r := range runs {
		if v, _, ok := g.value(r); ok && cs.shows(r) {
			top = max(top, v)
		}
	}
	out := []string{fitLine(st.bold.Render(g.title), w)}
	for i, r := range runs {
		if !cs.shows(r) {
			continue
		}
		v, text, ok := g.value(r)
		bar := st.dim.Render(strings.Repeat("·", bw))
		if !ok {
			text = "--"
		} else if top > 0 {
			var c [6]int64
			stacked := false
			if g.stack != nil {
				c, stacked = g.stack(r)
			}
			bar = valueBar(v, top, c, stacked, bw, runStyle(i, st), st)
		}
		out = append(out, fitLine(runStyle(i, st).Render(string(runMark(i)))+" "+bar+" "+padLeft(text, vw), w))
	}
	return out
}

// valueBar is v/top of w cells: the memory categories side by side when
// stacked (what the largest report did not attribute is '░'), else one
// block with an eighth-cell tip.
func valueBar(v, top float64, c [6]int64, stacked bool, w int, rs lipgloss.Style, st styles) string {
	full := v / top * float64(w)
	var b strings.Builder
	at := 0
	if stacked {
		var cum int64
		for i, n := range c {
			cum += n
			end := min(int(math.Round(float64(cum)/top*float64(w))), w)
			if k := end - at; k > 0 {
				g := "█"
				if st.plain {
					g = string(catGlyph[i])
				}
				b.WriteString(st.cat[i].Render(strings.Repeat(g, k)))
				at = end
			}
		}
		if end := min(int(math.Round(full)), w); end > at {
			b.WriteString(st.dim.Render(strings.Repeat("░", end-at)))
			at = end
		}
	} else {
		cells := min(int(full), w)
		s := strings.Repeat("█", cells)
		if tip := int((full - float64(cells)) * 8); tip > 0 && cells < w {
			s += string([]rune(" ▏▎▍▌▋▊▉")[tip])
			cells++
		}
		b.WriteString(rs.Render(s))
		at = cells
	}
	if at < w {
		b.WriteString(st.dim.Render(strings.Repeat("·", w-at)))
	}
	return b.String()
}
