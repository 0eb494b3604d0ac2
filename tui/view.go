package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// Sizes used before the first WindowSizeMsg, and the threshold of the wide
// (three-row, two-column) layout.
const (
	defaultW, defaultH = 80, 24
	wideW, wideH       = 120, 30
)

// View renders the full screen in the alternate screen buffer. The screen
// is drawn again only when the model changed since the last one, and for
// runner events only once their frame is due (Update): a step, a memory
// report or a chunk snapshot never redraws it by itself, so the UI costs
// at most ten screens a second however fast the runs train.
func (m Model) View() tea.View {
	f := m.fr
	if f == nil {
		f = &frame{}
	}
	if !f.drawn || f.w != m.w || f.h != m.h || (f.ver != m.ver && !m.lazy) {
		f.text, f.ver, f.w, f.h, f.drawn = m.render(), m.ver, m.w, m.h, true
		f.renders++
	}
	v := tea.NewView(f.text)
	v.AltScreen = true
	v.WindowTitle = "resnetlab"
	if r := m.selected(); r != nil {
		v.WindowTitle += " · " + r.info.ID
	}
	return v
}

// width is the terminal width (the default before the first WindowSizeMsg).
func (m Model) width() int {
	if m.w <= 0 {
		return defaultW
	}
	return m.w
}

// render returns exactly h lines of w cells: header, body, notice, footer,
// with any dialog drawn on top.
func (m Model) render() string {
	w, h := m.w, m.h
	if w <= 0 || h <= 0 {
		w, h = defaultW, defaultH
	}
	r := m.selected()
	if r == nil {
		return strings.Join(fitBlock([]string{"resnetlab " + m.opts.Title, "waiting for runs…"}, w, h), "\n")
	}
	lines := m.head.View(r, m.sel, len(m.runs), w, m.st)
	notice := m.noticeLines(w)
	bodyH := max(h-len(lines)-1-len(notice), 0)
	if m.compare {
		lines = append(lines, compareView(m.runs, m.sel, m.cmp, w, bodyH, m.st)...)
	} else {
		lines = append(lines, dashboard(r, w, bodyH, m.st)...)
	}
	for _, l := range notice {
		lines = append(lines, fitLine(l, w))
	}
	lines = append(lines, fitLine(m.footer(w), w))
	lines = fitBlock(lines, w, h)
	if box := m.overlayBox(w); box != "" {
		lines = overlay(lines, box, w)
	}
	return strings.Join(lines, "\n")
}

// notice is the last thing that happened, shown on the notice line. The
// text is kept plain and styled only when drawn: a pre-styled string would
// have its escapes mangled by oneLine (they showed up as "[1;38;2;…m").
type notice struct {
	text string
	ok   bool // a confirmation: drawn with a green ✓
	wrap bool // it gives a command line: wrapped (noticeLines), never cut, so it can be copied
}

// note builds a plain notice from a format and its arguments.
func note(format string, args ...any) notice {
	return notice{text: fmt.Sprintf(format, args...)}
}

// maxNoticeLines is how many lines a long notice may take: a command line
// it gives (how to resume) must be whole on the screen to be copied.
const maxNoticeLines = 4

// noticeLines is the notice on one line, or, one that gives a command
// line, wrapped at spaces to w cells on up to maxNoticeLines lines (one
// empty line when there is none).
func (m Model) noticeLines(w int) []string {
	if m.notice.text == "" {
		return []string{""}
	}
	lead, width := m.st.key.Render("»")+" ", 2
	if m.notice.ok {
		lead, width = lead+m.st.ok.Render("✓")+" ", 4
	}
	if !m.notice.wrap {
		return []string{lead + oneLine(m.notice.text)}
	}
	rows := wrapWords(oneLine(m.notice.text), max(w-width, 1), maxNoticeLines)
	for i := range rows {
		if i == 0 {
			rows[i] = lead + rows[i]
		} else {
			rows[i] = strings.Repeat(" ", width) + rows[i]
		}
	}
	return rows
}

// wrapWords breaks s at spaces into lines of at most w cells, at most n of
// them (the last one then cut by fitLine); a word longer than w is cut.
func wrapWords(s string, w, n int) []string {
	var rows []string
	cur := ""
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = word
		case ansi.StringWidth(cur)+1+ansi.StringWidth(word) <= w || len(rows) == n-1:
			cur += " " + word
		default:
			rows = append(rows, cur)
			cur = word
		}
	}
	return append(rows, cur)
}

func (m Model) overlayBox(w int) string {
	switch m.overlay {
	case helpOverlay:
		return helpView(m.keys, w, m.st)
	case quitOverlay:
		return m.quitDlg.View(w, m.st)
	case pickerOverlay:
		return m.picker.View(w, m.st)
	}
	return ""
}

// footer is the key hint line (bubbles/help), adapted to the state.
func (m Model) footer(w int) string {
	h := help.New()
	if m.st.plain {
		h.Styles = help.Styles{}
	}
	k := m.keys
	switch {
	case len(m.stopping) > 0:
		return fmt.Sprintf("stopping %d run(s)… ctrl+c quits at once", len(m.stopping))
	case m.compare: // its own keys: the dashboard's would mislead here
		return fitHelp(h, w, k.CompareHelp(false, m.allFinished()), k.CompareHelp(true, m.allFinished()))
	case m.allFinished():
		h.SetWidth(w)
		return h.ShortHelpView([]key.Binding{k.Exit, k.Next, k.Compare, k.Resume, k.Help})
	}
	return fitHelp(h, w, k.ShortHelp(), k.CompactHelp())
}

// fitHelp is the long key line when it fits in w cells, else the compact
// one, cut with "…" where even that does not fit.
func fitHelp(h help.Model, w int, long, compact []key.Binding) string {
	if s := h.ShortHelpView(long); ansi.StringWidth(s) <= w {
		return s
	}
	h.SetWidth(w)
	return h.ShortHelpView(compact)
}

// dashboard lays out the run's panes in w x h cells.
func dashboard(r *run, w, h int, st styles) []string {
	if h <= 0 {
		return nil
	}
	prog := r.prog.View(w, st)
	if h <= len(prog) {
		return fitBlock(prog, w, h)
	}
	rest := h - len(prog)
	var body []string
	if w >= wideW && h >= wideH-4 {
		body = wideBody(r, w, rest, st)
	} else {
		body = narrowBody(r, w, rest, st)
	}
	return fitBlock(append(prog, body...), w, h)
}

// narrowBody stacks: curves beside memory, chunk strip (gemini only), log.
func narrowBody(r *run, w, h int, st styles) []string {
	chunkH := 0
	if r.chunks.gemini {
		chunkH = min(3+max(len(r.chunks.ranks), 1), h/4+1)
	}
	logH := max(h/4, 3)
	midH := max(h-chunkH-logH, 0)
	if midH < 6 { // too short for plots: give the room to the log
		logH, midH = h-chunkH, 0
	}
	var mid []string
	if w >= 70 {
		memW := w * 45 / 100
		mid = joinColumns(r.curves.View(w-memW-1, midH, st), r.mem.View(memW, midH, st))
	} else {
		memH := min(2+2*max(len(r.mem.ranks), 1), midH/2)
		mid = append(r.curves.View(w, midH-memH, st), r.mem.View(w, memH, st)...)
	}
	out := append(mid, r.chunks.View(w, chunkH, st)...)
	return append(out, r.log.View(w, max(logH, 0), st)...)
}

// wideBody is two columns: memory above the chunk strip on the left, the
// curves above the log on the right.
func wideBody(r *run, w, h int, st styles) []string {
	leftW := w * 40 / 100
	rightW := w - leftW - 1
	memH := min(r.mem.height(leftW, st), h*60/100)
	curvesH := h * 55 / 100
	left := append(r.mem.View(leftW, memH, st), r.chunks.View(leftW, h-memH, st)...)
	right := append(r.curves.View(rightW, curvesH, st), r.log.View(rightW, h-curvesH, st)...)
	return joinColumns(left, right)
}
