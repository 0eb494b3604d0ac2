package tui

import (
	"fmt"
	"math"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/runner"
)

// memoryPane shows every rank's device and host memory as stacked bars, one
// segment per category, with the device budget and the peak marked.
type memoryPane struct {
	ranks []runner.MemoryUsage // indexed by rank
	seen  []bool
}

func (m *memoryPane) Update(ev runner.Event) {
	switch e := ev.(type) {
	case runner.RunStarted:
		m.ranks, m.seen = nil, nil
	case runner.MemoryUsage:
		if e.Rank < 0 {
			return
		}
		for len(m.ranks) <= e.Rank {
			m.ranks = append(m.ranks, runner.MemoryUsage{})
			m.seen = append(m.seen, false)
		}
		m.ranks[e.Rank], m.seen[e.Rank] = e, true
	}
}

func total(c [6]int64) int64 {
	var t int64
	for _, b := range c {
		t += b
	}
	return t
}

// View renders the pane into exactly h lines of w cells.
func (m *memoryPane) View(w, h int, st styles) []string {
	title := "memory"
	if n := len(m.ranks); n > 0 {
		title = fmt.Sprintf("memory · %d rank%s", n, plural(n))
	}
	lines := []string{rule(title, w, st)}
	if len(m.ranks) == 0 {
		lines = append(lines, st.dim.Render("  waiting for memory reports…"))
		return fitBlock(lines, w, h)
	}
	leg := legend(w, st)
	room := h - 1 - len(leg) // title and legend
	shown := 0
	lw := len(fmt.Sprintf("r%d", len(m.ranks)-1))
	for r := range m.ranks {
		if room < 2 || (room < 4 && r < len(m.ranks)-1) {
			break // keep a line for "+N more"
		}
		lines = append(lines, m.rankLines(r, lw, w, st)...)
		room -= 2
		shown++
	}
	if shown < len(m.ranks) {
		lines = append(lines, st.dim.Render(fmt.Sprintf("  +%d more rank(s)", len(m.ranks)-shown)))
		room--
	}
	lines = append(lines, leg...)
	if room >= 3 && w >= 56 {
		lines = append(lines, m.table(lw, min(room, 1+2*len(m.ranks)), st)...)
	}
	return fitBlock(lines, w, h)
}

// height is the number of lines the pane needs to show everything at width
// w: title, two lines per rank, legend and the per-category table.
func (m *memoryPane) height(w int, st styles) int {
	n := max(len(m.ranks), 1)
	h := 1 + 2*n + len(legend(w, st))
	if w >= 56 && len(m.ranks) > 0 {
		h += 1 + 2*n
	}
	return h
}

// rankLines is one rank's device and host bars, drawn to one scale so
// that their lengths compare: the device line is the rank's backend
// (`cpu` on the CPU backend, whose device is host memory) against its
// budget (or capacity); the host line is all the host memory the rank
// holds (MemoryUsage.HostTotal, what the comparison and the results call
// peak host): pinned and pageable buffers outside the backend, and on the
// CPU backend the backend itself (the suffix then says "= cpu + N").
func (m *memoryPane) rankLines(r, lw, w int, st styles) []string {
	u := m.ranks[r]
	if !m.seen[r] {
		return []string{fmt.Sprintf("%-*s --", lw, fmt.Sprintf("r%d", r)), ""}
	}
	limit := u.Budget
	if limit == 0 {
		limit = u.Capacity
	}
	used := total(u.Device)
	dpeak := max(u.DevicePeak, used)
	dsuf := fmtBytes(used)
	if limit > 0 {
		dsuf += "/" + fmtBytes(limit)
	}
	dsuf += " pk " + fmtBytes(dpeak)
	if u.Budget > 0 && used > u.Budget {
		dsuf = st.bad.Render(dsuf)
	}
	hcats := hostCategories(u)
	hused := u.HostTotal()
	hpeak := max(u.HostTotalPeak(), hused)
	hsuf := fmtBytes(hused)
	if u.DeviceIsHost {
		hsuf += " = cpu + " + fmtBytes(hused-used)
	}
	if u.HostPinned > 0 {
		hsuf += " pin " + fmtBytes(u.HostPinned)
	}
	hsuf += " pk " + fmtBytes(hpeak)
	sw := max(ansi.StringWidth(dsuf), ansi.StringWidth(hsuf))
	bw := w - lw - 6 - sw - 1
	pre := fmt.Sprintf("%-*s ", lw, fmt.Sprintf("r%d", r))
	blank := strings.Repeat(" ", lw+1)
	dev := "dev  "
	if u.DeviceIsHost {
		dev = "cpu  " // the CPU backend: the "device" is host memory too
	}
	scale := max(limit, dpeak, hpeak)
	return []string{
		pre + dev + stackedBar(u.Device, limit, dpeak, scale, bw, st) + " " + dsuf,
		blank + "host " + stackedBar(hcats, 0, hpeak, scale, bw, st) + " " + hsuf,
	}
}

// hostCategories is the host bytes per category, adding up to HostTotal:
// Gemini's host tier as its allocator counts them, the rank's other host
// buffers (batch buffers, comm and copy staging), which hold data, in the
// data column, and on the CPU backend the backend's own categories.
func hostCategories(u runner.MemoryUsage) [6]int64 {
	c := u.Host
	if extra := u.HostPageable + u.HostPinned - total(u.Host); extra > 0 {
		c[5] += extra
	}
	if u.DeviceIsHost {
		for i, b := range u.Device {
			c[i] += b
		}
	}
	return c
}

// stackedBar draws the categories side by side over w cells, scaled to the
// largest of scale, limit, peak and use. '│' marks the limit, '┊' the
// peak; free cells are '·'. Segment ends are rounded from the running sum
// so that the segments add up exactly to the rounded total.
func stackedBar(c [6]int64, limit, peak, scale int64, w int, st styles) string {
	if w < 4 {
		return ""
	}
	used := total(c)
	scale = max(scale, limit, peak, used)
	if scale <= 0 {
		return st.dim.Render(strings.Repeat("·", w))
	}
	cell := func(b int64) int { return int(math.Round(float64(b) / float64(scale) * float64(w))) }
	var sb strings.Builder
	var cum int64
	at := 0
	for i, b := range c {
		cum += b
		end := cell(cum)
		if n := end - at; n > 0 {
			g := "█"
			if st.plain {
				g = string(catGlyph[i])
			}
			sb.WriteString(st.cat[i].Render(strings.Repeat(g, n)))
		}
		at = max(at, end)
	}
	free := []rune(strings.Repeat("·", w-at))
	mark := func(b int64, r rune) {
		if i := cell(b) - 1 - at; b > 0 && i >= 0 && i < len(free) {
			free[i] = r
		}
	}
	mark(peak, '┊')
	mark(limit, '│') // the limit wins a shared cell: it is the harder fact
	sb.WriteString(st.dim.Render(string(free)))
	return sb.String()
}

// legend names the category glyphs (letters without colour, colours with),
// packed into as few lines of w cells as possible.
func legend(w int, st styles) []string {
	items := make([]string, 0, 8)
	for i, n := range catShort {
		g := "■"
		if st.plain {
			g = string(catGlyph[i])
		}
		items = append(items, st.cat[i].Render(g)+" "+n)
	}
	items = append(items, st.dim.Render("│ budget"), st.dim.Render("┊ peak"))
	return pack(items, w)
}

// pack joins items with two spaces, starting a new line when one is full.
func pack(items []string, w int) []string {
	var lines []string
	cur := ""
	for _, it := range items {
		switch {
		case cur == "":
			cur = it
		case ansi.StringWidth(cur)+2+ansi.StringWidth(it) <= w:
			cur += "  " + it
		default:
			lines = append(lines, cur)
			cur = it
		}
	}
	return append(lines, cur)
}

// table lists the bytes per category for the ranks that fit in h lines.
func (m *memoryPane) table(lw, h int, st styles) []string {
	head := fmt.Sprintf("%-*s     ", lw, "")
	for _, n := range catShort {
		head += fmt.Sprintf(" %6s", n)
	}
	out := []string{st.dim.Render(head)}
	for r, u := range m.ranks {
		if len(out)+2 > h {
			break
		}
		dev := "dev "
		if u.DeviceIsHost {
			dev = "cpu "
		}
		out = append(out, tableRow(fmt.Sprintf("%-*s %s", lw, fmt.Sprintf("r%d", r), dev), u.Device))
		out = append(out, tableRow(fmt.Sprintf("%-*s host", lw, ""), hostCategories(u)))
	}
	return out
}

func tableRow(label string, c [6]int64) string {
	s := label
	for _, b := range c {
		s += fmt.Sprintf(" %6s", fmtBytes(b))
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
