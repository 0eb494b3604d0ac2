package tui

import (
	"fmt"
	"testing"
)

func TestDebugScreen(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {160, 48}} {
		f := newFakeRunner(t, 0)
		f.halt = haltAt{run: "gemini-fp16-2", epoch: 3, step: 12}
		f.start()
		tm, rec := startTUI(t, f.options(), sz[0], sz[1])
		waitScreen(t, rec, "halt", func(string) bool {
			n, h := f.state()
			_, seen := rec.get()
			return h && seen == n
		})
		s, _ := rec.get()
		fmt.Println(s)
		for _, k := range []string{"v", "v", "?", "esc", "q", "esc", "r"} {
			sendKey(tm, k)
		}
		waitScreen(t, rec, "picker", contains("Resume gemini"))
		s, _ = rec.get()
		fmt.Println(s)
	}
}
