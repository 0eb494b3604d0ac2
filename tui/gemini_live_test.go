package tui

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/runner"
)

// The chunk and memory panes, fed the events of a real budgeted Gemini run
// on the CPU, change during a step: the strip shows COMPUTE,
// HOLD_AFTER_BWD and READY_FOR_REDUCE cells, chunks in host memory (lower
// case), and the memory pane the budget and host bytes above zero.
func TestPanesFollowABudgetedGeminiRun(t *testing.T) {
	free := geminiEvents(t, "")
	var peak int64
	for _, e := range free {
		if f, ok := e.(runner.RunFinished); ok && f.Result != nil {
			peak = f.Result.PeakDeviceBytes[0]
		}
	}
	if peak == 0 {
		t.Fatal("the unbudgeted run reported no device peak")
	}
	budget := peak / 2 >> 10 // KiB
	evs := geminiEvents(t, fmt.Sprintf("device_budget = \"%dKiB\"\n", budget))

	st := newStyles(true)
	strip := chunkStrip{gemini: true}
	var mem memoryPane
	strips := map[string]bool{}
	letters := map[rune]bool{}
	active := map[string]bool{} // states some frame counts tensors in
	for _, e := range evs {
		strip.Update(e)
		mem.Update(e)
		if _, ok := e.(runner.ChunksUpdate); !ok {
			continue
		}
		lines := strip.View(100, 14, st)
		row := ansi.Strip(lines[1]) // "r0 <cells>"
		strips[row] = true
		for _, r := range strings.TrimPrefix(row, "r0 ") {
			letters[r] = true
		}
		for _, m := range countRE.FindAllStringSubmatch(ansi.Strip(strings.Join(lines, "\n")), -1) {
			active[m[1]] = active[m[1]] || m[2] != "0"
		}
	}
	if len(strips) < 2 {
		t.Errorf("the strip took %d distinct forms over the run: %v", len(strips), strips)
	}
	for _, s := range []int{stCompute, stHoldAfterBwd, stReadyForReduce} {
		if !active[stateNames[s]] {
			t.Errorf("no frame counts a tensor in %s (%v)", stateNames[s], active)
		}
	}
	if !hasLower(letters) {
		t.Errorf("no chunk shown in host memory (letters seen %q)", keys(letters))
	}
	pane := ansi.Strip(strings.Join(mem.View(100, 12, st), "\n"))
	want := regexp.MustCompile(`/` + regexp.QuoteMeta(fmtBytes(budget<<10)) + ` pk `)
	if !want.MatchString(pane) {
		t.Errorf("memory pane does not show the %s budget:\n%s", fmtBytes(budget<<10), pane)
	}
	if host := regexp.MustCompile(`host .* (\S+) pk`).FindStringSubmatch(pane); host == nil || host[1] == "0B" || host[1] == "0 B" {
		t.Errorf("memory pane shows no host bytes:\n%s", pane)
	}
}

// countRE reads the chunk pane's "C COMPUTE 3" counts.
var countRE = regexp.MustCompile(`[A-Z] ([A-Z_]+) (\d+)`)

// geminiEvents trains a width-8 gemini fp16 run of 8 synthetic images,
// batch 2, with small chunks so that some can leave the device, and
// returns every event it sent.
func geminiEvents(t *testing.T, extra string) []runner.Event {
	t.Helper()
	s, _ := tempSpec(t, "panes", `
name = "panes"
dataset = "synthetic"
width = 8
epochs = 1
batch_size = 2
lr = 2e-3
device = "cpu"

[synthetic]
train = 8
test = 10
seed = 3

[[run]]
plugin = "gemini"
precision = "fp16"

[gemini]
placement = "auto"
chunk_size = "72KiB"
`+extra)
	events := make(chan runner.Event, 1024)
	var got []runner.Event
	done := make(chan struct{})
	go func() {
		for e := range events {
			got = append(got, e)
		}
		close(done)
	}()
	err := runner.RunSpec(context.Background(), s, runner.RunOptions{}, events, nil)
	close(events)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func hasLower(set map[rune]bool) bool {
	for r := range set {
		if r >= 'a' && r <= 'z' {
			return true
		}
	}
	return false
}

func keys(set map[rune]bool) string {
	var b strings.Builder
	for r := range set {
		b.WriteRune(r)
	}
	return b.String()
}
