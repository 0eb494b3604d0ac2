package tui

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"resnetlab/ckpt"
	"resnetlab/runner"
	"resnetlab/spec"
)

// The r key on a paused run, against the real runner on the CPU: p
// pauses it in epoch 2, r and enter resume it from epoch 1, and the run
// trains on to DONE without another key, as the RUNNING header then says.
// (The runner used to stay paused behind a RUNNING header, and p, sent as
// Pause, could not reach it: the run never went on.)
func TestResumeWhilePausedTrainsOn(t *testing.T) {
	s, dir := liveSpec(t)
	cells, _, err := s.Cells()
	if err != nil {
		t.Fatal(err)
	}
	id := cells[0].ID
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmds := make(chan runner.Command, 16)
	events, release := heldAt(ctx, t, s, cmds, func(e runner.Event) bool {
		sd, ok := e.(runner.StepDone)
		return ok && sd.Epoch == 2 && sd.Step == 1
	})
	o := Options{Runs: []runner.RunInfo{runner.QueuedInfo(s, cells[0])}, Events: events,
		Send: func(run string, c runner.Command) bool { cmds <- runner.To{Run: run, Cmd: c}; return true },
		Checkpoints: func(string) []ckpt.Ref {
			refs, _ := ckpt.ListRefs(filepath.Join(dir, "ckpt"))
			return refs
		}}
	tm, rec := startTUI(t, o, 100, 30)
	waitScreen(t, rec, "epoch 2", contains("epoch 2/2"))
	sendKey(tm, "p") // while the runner waits for the screen: the pause lands in epoch 2
	waitScreen(t, rec, "PAUSING", contains("PAUSING…"))
	close(release)
	waitScreen(t, rec, "PAUSED", contains(" PAUSED"))
	sendKey(tm, "r")
	waitScreen(t, rec, "picker", contains("▸ epoch 1"))
	sendKey(tm, "enter")
	end := waitScreen(t, rec, "the run trained to its end", contains(" DONE"))
	from, again := strings.Index(end, "started from the checkpoint of epoch 1"), strings.LastIndex(end, "epoch 2 · loss")
	if from < 0 || again < from || !strings.Contains(end, id) {
		t.Fatalf("%s is done, but its log does not show epoch 2 trained again after the resume:\n%s", id, end)
	}
}

// liveSpec is a run of two epochs of 6 steps that saves every epoch.
func liveSpec(t *testing.T) (*spec.Spec, string) {
	return tempSpec(t, "live", `
name = "live"
dataset = "synthetic"
width = 4
epochs = 2
batch_size = 20
device = "cpu"
interval = 1

[synthetic]
train = 120
test = 50
seed = 3
`)
}

// tempSpec parses body as the spec file NAME.toml of a fresh directory,
// with its checkpoint and results_dir in that directory, and returns the
// spec and the directory.
func tempSpec(t *testing.T, name, body string) (*spec.Spec, string) {
	t.Helper()
	dir := t.TempDir()
	src := fmt.Sprintf("checkpoint = %q\nresults_dir = %q\n%s", filepath.Join(dir, "ckpt"), filepath.Join(dir, "results"), body)
	s, err := spec.Parse(filepath.Join(dir, name+".toml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// heldAt runs s with the real runner and passes its events on; after the
// first event for which hold is true it passes none until release is
// closed, so the runner waits (its events channel is unbuffered) while the
// test presses keys.
func heldAt(ctx context.Context, t *testing.T, s *spec.Spec, cmds <-chan runner.Command,
	hold func(runner.Event) bool) (<-chan runner.Event, chan struct{}) {
	in, out, release := make(chan runner.Event), make(chan runner.Event), make(chan struct{})
	go func() {
		if err := runner.RunSpec(ctx, s, runner.RunOptions{}, in, cmds); err != nil && ctx.Err() == nil {
			t.Errorf("the run: %v", err)
		}
		close(in)
	}()
	go func() {
		defer close(out)
		held := false
		for e := range in {
			select {
			case out <- e:
			case <-ctx.Done(): // the test is over: let the runner end
				continue
			}
			if !held && hold(e) {
				held = true
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
		}
	}()
	return out, release
}
