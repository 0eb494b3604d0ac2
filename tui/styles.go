package tui

import (
	"charm.land/lipgloss/v2"
)

// Tensor states in the order of runner.ChunkState.States.
const (
	stFree = iota
	stCompute
	stHold
	stHoldAfterBwd
	stReadyForReduce
	numStates
)

var stateNames = [numStates]string{"FREE", "COMPUTE", "HOLD", "HOLD_AFTER_BWD", "READY_FOR_REDUCE"}

// stateGlyph is the letter of a chunk cell; upper case = on device, lower
// case = in host memory. Letters (not only colours) keep the strip readable
// in a colourless terminal or a text capture.
var stateGlyph = [numStates]rune{'F', 'C', 'H', 'B', 'R'}

// Memory categories in the order of kernels.Category / runner.MemoryUsage.
var catNames = [6]string{"params", "grads", "optimizer", "activations", "workspace", "data"}
var catShort = [6]string{"param", "grad", "optim", "activ", "work", "data"}
var catGlyph = [6]rune{'p', 'g', 'o', 'a', 'w', 'd'}

// styles holds every lipgloss style of the app. plain is set for terminals
// without colour: bars then use category letters instead of coloured blocks.
type styles struct {
	plain                 bool
	title, dim, bold, key lipgloss.Style
	ok, warn, bad, sel    lipgloss.Style
	intr                  lipgloss.Style // INTERRUPTED: neither failed nor done
	cat                   [6]lipgloss.Style
	state                 [numStates]lipgloss.Style
	box                   lipgloss.Style
}

var (
	catColors   = [6]string{"#5fafff", "#d787ff", "#ffaf5f", "#87d787", "#d7d75f", "#8a8a8a"}
	stateColors = [numStates]string{"#4e4e4e", "#ff5f5f", "#5f87ff", "#af87ff", "#5fd787"}
)

func newStyles(plain bool) styles {
	s := styles{plain: plain}
	border := lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1)
	if plain {
		none := lipgloss.NewStyle()
		s.title, s.dim, s.bold, s.key = none, none, none, none
		s.ok, s.warn, s.bad, s.intr = none, none, none, none
		s.box = border
		s.sel = lipgloss.NewStyle().Reverse(true)
		for i := range s.cat {
			s.cat[i] = lipgloss.NewStyle()
		}
		for i := range s.state {
			s.state[i] = lipgloss.NewStyle()
		}
		return s
	}
	fg := func(c string) lipgloss.Style { return lipgloss.NewStyle().Foreground(lipgloss.Color(c)) }
	s.title = fg("#87afd7").Bold(true)
	s.dim = fg("#6c6c6c")
	s.bold = lipgloss.NewStyle().Bold(true)
	s.key = fg("#ffd75f").Bold(true)
	s.ok = fg("#87d787").Bold(true)
	s.warn = fg("#ffd75f").Bold(true)
	s.bad = fg("#ff5f5f").Bold(true)
	s.intr = fg("#ff8700").Bold(true).Italic(true)
	s.sel = lipgloss.NewStyle().Reverse(true)
	s.box = border.BorderForeground(lipgloss.Color("#87afd7"))
	for i, c := range catColors {
		s.cat[i] = fg(c)
	}
	for i, c := range stateColors {
		s.state[i] = lipgloss.NewStyle().Background(lipgloss.Color(c)).Foreground(lipgloss.Color("#ffffff"))
	}
	return s
}
