package tui

import "charm.land/bubbles/v2/key"

// keyMap lists every binding; it feeds the footer and the help overlay
// (bubbles/help) as well as the matching in Update.
type keyMap struct {
	Pause, Checkpoint, Resume key.Binding
	Next, Prev, Compare       key.Binding
	Help, Quit, ForceQuit     key.Binding
	Up, Down, Enter, Cancel   key.Binding
	Yes, No                   key.Binding
	// In the comparison (v): which runs it draws, the epoch cursor, the bars.
	Toggle, ShowAll, EpochLeft, EpochRight, BarPage key.Binding
	Exit                                            key.Binding // leave once every run is finished
}

func defaultKeys() keyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return keyMap{
		Pause:      b([]string{"p"}, "p", "pause/resume"),
		Checkpoint: b([]string{"c"}, "c", "checkpoint now"),
		Resume:     b([]string{"r"}, "r", "resume from checkpoint"),
		Next:       b([]string{"tab"}, "tab", "next run"),
		Prev:       b([]string{"shift+tab"}, "shift+tab", "previous run"),
		Compare:    b([]string{"v"}, "v", "compare runs"),
		Help:       b([]string{"?"}, "?", "help"),
		Quit:       b([]string{"q"}, "q", "quit"),
		ForceQuit:  b([]string{"ctrl+c"}, "ctrl+c", "quit now (runs checkpoint and stop)"),
		Up:         b([]string{"up", "k"}, "↑/k", "dialog: up"),
		Down:       b([]string{"down", "j"}, "↓/j", "dialog: down"),
		Enter:      b([]string{"enter"}, "enter", "dialog: choose"),
		Cancel:     b([]string{"esc"}, "esc", "dialog: cancel"),
		Yes:        b([]string{"y"}, "y", "checkpoint, then quit"),
		No:         b([]string{"n"}, "n", "quit without checkpoint"),
		Toggle:     b([]string{"space"}, "space", "v: hide/show run"),
		ShowAll:    b([]string{"a"}, "a", "v: show all"),
		EpochLeft:  b([]string{"left", "h"}, "←/h", "v: epoch back"),
		EpochRight: b([]string{"right", "l"}, "→/l", "v: epoch on"),
		BarPage:    b([]string{"b"}, "b", "v: next bars"),
		Exit:       b([]string{"q", "enter", "esc", "space"}, "q/enter", "exit"),
	}
}

// ShortHelp is the footer line.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Pause, k.Checkpoint, k.Resume, k.Next, k.Compare, k.Help, k.Quit}
}

// CompactHelp is the footer line for narrow terminals: the same keys with
// shorter words, so that "? help" and "q quit" still fit in 80 columns.
func (k keyMap) CompactHelp() []key.Binding {
	short := func(b key.Binding, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(b.Keys()...), key.WithHelp(b.Help().Key, desc))
	}
	return []key.Binding{short(k.Pause, "pause"), short(k.Checkpoint, "checkpoint"), short(k.Resume, "resume"),
		short(k.Next, "next run"), short(k.Compare, "compare"), k.Help, k.Quit}
}

// CompareHelp is the footer line of the comparison (v): the keys that act
// there, not the dashboard's; exit replaces quit once every run has
// finished. compact gives the shorter words of narrow terminals.
func (k keyMap) CompareHelp(compact, finished bool) []key.Binding {
	b := func(keys []string, k, long, short string) key.Binding {
		if compact {
			long = short
		}
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, long))
	}
	back, end := "v/esc", k.Quit
	if compact {
		back = "esc"
	}
	if finished {
		end = k.Exit
		if compact { // q exits too: 80 columns have no room for "q/enter"
			end = key.NewBinding(key.WithKeys(k.Exit.Keys()...), key.WithHelp("q", "exit"))
		}
	}
	return []key.Binding{
		b(k.Toggle.Keys(), "space", "hide/show run", "hide"),
		b(k.ShowAll.Keys(), "a", "show all", "all"),
		b(append(k.EpochLeft.Keys(), k.EpochRight.Keys()...), "←/→", "epoch", "epoch"),
		b(k.BarPage.Keys(), "b", "next bars", "bars"),
		b(k.Next.Keys(), "tab", "next run", "run"),
		b(append(k.Compare.Keys(), k.Cancel.Keys()...), back, "back to the run", "back"),
		k.Help, end,
	}
}

// FullHelp is the help overlay, one column per group; the last column is
// the resume and quit dialogs' keys.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Pause, k.Checkpoint, k.Resume},
		{k.Next, k.Prev, k.Compare},
		{k.Toggle, k.ShowAll, k.EpochLeft, k.EpochRight, k.BarPage},
		{k.Help, k.Quit, k.ForceQuit},
		{k.Up, k.Down, k.Enter, k.Cancel, k.Yes, k.No},
	}
}
