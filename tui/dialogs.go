package tui

import (
	"fmt"
	"resnetlab/ckpt"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// dialogResult is what a dialog's Update decided.
type dialogResult int

const (
	dialogOpen   dialogResult = iota // still waiting for the user
	dialogCancel                     // closed without action
	dialogYes                        // quit: checkpoint first / picker: chosen
	dialogNo                         // quit without checkpoint
)

// quitDialog asks whether to checkpoint the running runs before quitting.
type quitDialog struct {
	training, paused int // the runs Quit stops: paused ones are not training
}

func (d quitDialog) Update(msg tea.KeyPressMsg, k keyMap) dialogResult {
	switch {
	case key.Matches(msg, k.Yes):
		return dialogYes
	case key.Matches(msg, k.No):
		return dialogNo
	case key.Matches(msg, k.Cancel):
		return dialogCancel
	}
	return dialogOpen
}

func (d quitDialog) View(w int, st styles) string {
	lines := []string{st.bold.Render("Quit resnetlab?")}
	if d.training > 0 {
		lines = append(lines, fmt.Sprintf("%d run%s still training.", d.training, plural(d.training)))
	}
	if d.paused > 0 {
		lines = append(lines, fmt.Sprintf("%d run%s paused (stopped too).", d.paused, plural(d.paused)))
	}
	if d.training+d.paused == 0 {
		lines = append(lines, "Queued runs will not start.")
	}
	lines = append(lines, "",
		st.key.Render("y")+"    save a checkpoint, then quit",
		st.key.Render("n")+"    quit without a checkpoint",
		st.key.Render("esc")+"  keep running")
	return box(lines, w, st)
}

// resumePicker lists a run's saved checkpoints, newest first.
type resumePicker struct {
	run      string
	refs     []ckpt.Ref
	cursor   int
	finished status // the run's status when it has finished (it is re-opened), else 0
	last     bool   // a checkpoint of the end of the last epoch was left out (trainable)
}

// pickerRows is how many checkpoints the picker shows at once.
const pickerRows = 8

func (p *resumePicker) Update(msg tea.KeyPressMsg, k keyMap) dialogResult {
	switch {
	case key.Matches(msg, k.Up):
		p.cursor = max(p.cursor-1, 0)
	case key.Matches(msg, k.Down):
		p.cursor = min(p.cursor+1, max(len(p.refs)-1, 0))
	case key.Matches(msg, k.Enter):
		if len(p.refs) == 0 {
			return dialogCancel
		}
		return dialogYes
	case key.Matches(msg, k.Cancel):
		return dialogCancel
	}
	return dialogOpen
}

func (p *resumePicker) chosen() ckpt.Ref { return p.refs[p.cursor] }

func (p *resumePicker) View(w int, st styles) string {
	lines := []string{st.bold.Render("Resume " + p.run + " from checkpoint")}
	if p.finished != 0 && len(p.refs) > 0 {
		lines = append(lines, fmt.Sprintf("%s is %s: it trains again from the", p.run, strings.ToLower(p.finished.String())),
			"chosen checkpoint to the end; its result is replaced")
	}
	if len(p.refs) == 0 {
		none := "no checkpoints saved for this run"
		if p.last { // saved, but nothing would train from it
			none = "only the end of its last epoch is saved: nothing left to train from it"
		}
		lines = append(lines, "", none, "", st.key.Render("esc")+" close")
		return box(lines, w, st)
	}
	lines = append(lines, "")
	first := min(max(p.cursor-pickerRows/2, 0), max(len(p.refs)-pickerRows, 0))
	for i := first; i < min(first+pickerRows, len(p.refs)); i++ {
		row := "  " + refLabel(p.refs[i])
		if i == p.cursor {
			row = st.sel.Render("▸ " + refLabel(p.refs[i]))
		}
		lines = append(lines, row)
	}
	lines = append(lines, "", st.dim.Render("↑/↓ choose · enter resume · esc cancel"))
	return box(lines, w, st)
}

// helpView is the help overlay: every key, grouped, plus what the panes are.
func helpView(k keyMap, w int, st styles) string {
	h := help.New()
	if st.plain {
		h.Styles = help.Styles{}
	}
	lines := []string{st.bold.Render("resnetlab keys"), ""}
	lines = append(lines, helpColumns(h, k.FullHelp(), max(w-4, 1))...)
	lines = append(lines, "",
		"panes: progress · loss/accuracy curves · memory per rank",
		"       gemini chunk strip · log     (v: every run's curves, bars)",
		"", st.dim.Render("press any key to close"))
	return box(lines, w, st)
}

// helpColumns lays the key groups out as columns, as many side by side as
// fit in w cells, the rest in further rows: at 80 columns the three groups
// do not fit in one row and bubbles/help would cut the last one off.
func helpColumns(h help.Model, groups [][]key.Binding, w int) []string {
	var rows []string
	for n := len(groups); n >= 1; n-- {
		rows = rows[:0]
		widest := 0
		for i := 0; i < len(groups); i += n {
			if i > 0 {
				rows = append(rows, "")
			}
			for _, l := range strings.Split(h.FullHelpView(groups[i:min(i+n, len(groups))]), "\n") {
				rows = append(rows, l)
				widest = max(widest, ansi.StringWidth(l))
			}
		}
		if widest <= w {
			return rows
		}
	}
	return rows // one group per row and still too wide: box cuts the lines
}

// box frames lines with a rounded border, cutting them to fit in w cells.
func box(lines []string, w int, st styles) string {
	inner := max(w-4, 1)
	for i, l := range lines {
		if ansi.StringWidth(l) > inner {
			lines[i] = ansi.Truncate(l, inner, "…")
		}
	}
	return st.box.Render(strings.Join(lines, "\n"))
}

// overlay draws the box centred over the base screen (h lines of w cells).
func overlay(base []string, boxStr string, w int) []string {
	bl := strings.Split(boxStr, "\n")
	bw := 0
	for _, l := range bl {
		bw = max(bw, ansi.StringWidth(l))
	}
	bw = min(bw, w)
	x := max((w-bw)/2, 0)
	y := max((len(base)-len(bl))/2, 0)
	out := append([]string(nil), base...)
	for i, l := range bl {
		if y+i >= len(out) {
			break
		}
		row := out[y+i]
		left := ansi.Truncate(row, x, "")
		right := ansi.TruncateLeft(row, x+bw, "")
		// Reset after each part so a style cut at the edge does not leak.
		out[y+i] = fitLine(left+ansi.ResetStyle+fitLine(l, bw)+ansi.ResetStyle+right, w)
	}
	return out
}

// refLabel is a picker row: an epoch's end, or a mid-epoch save.
func refLabel(r ckpt.Ref) string {
	if r.Step == 0 {
		return fmt.Sprintf("epoch %d", r.Epoch)
	}
	return fmt.Sprintf("epoch %d step %d (mid-epoch)", r.Epoch, r.Step)
}
