package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/spec"
	"slices"
	"strings"
	"testing"
)

// A ResumeFrom served while a run trains (the r key) gives the model and
// the curve of a fresh run resumed from the same checkpoint (resnetlab
// run --resume), bit for bit: from an epoch's end and from a mid-epoch
// save, on one rank in fp32 and on two ZeRO ranks in fp16. With
// milestones = [2] the run goes back to epoch 2 while it trains epoch 3,
// whose learning rate is a third of epoch 2's.
func TestInRunResumeEqualsFreshResume(t *testing.T) {
	for _, cell := range oneAndTwoRankCells {
		for _, mid := range []bool{false, true} {
			s := tinySpec(t, "[[run]]\n"+cell)
			s.Epochs, s.Milestones = 3, []int{2}
			inRun, from := resumedInRun(t, s, mid)
			evs, err := collect(t, s, RunOptions{Resume: from}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameRun(t, from.Describe(), inRun, finished(t, evs)[0])
		}
	}
}

// resumedInRun trains s, saves a step into epoch 2 when mid is set, and
// a step into epoch 3 sends ResumeFrom: the save of epoch 1's end, or the
// mid-epoch one. It returns the run's result and that checkpoint.
func resumedInRun(t *testing.T, s *spec.Spec, mid bool) (*report.Result, ckpt.Ref) {
	t.Helper()
	from, asked, started := ckpt.Ref{Epoch: 1}, false, false
	evs, err := driveGrid(t, context.Background(), s, RunOptions{}, func(e Event, cmds chan<- Command) {
		switch e := e.(type) {
		case StepDone:
			if mid && !asked && e.Epoch == 2 && e.Step == 1 {
				cmds <- CheckpointNow{}
			}
			if !asked && e.Epoch == 3 && e.Step == 1 {
				asked = true
				cmds <- ResumeFrom(from)
			}
		case CheckpointSaved:
			if e.Step > 0 {
				from = e.Ref()
			}
		case RunStarted:
			started = started || (asked && e.From() == from)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !started || (mid && from.Step == 0) {
		t.Fatalf("the run did not resume from a save of the kind wanted (mid-epoch %v): asked %v from %s", mid, asked, from.Describe())
	}
	return servedInRun(t, evs), from
}

// servedInRun is the result of the one run in evs, which must have served
// its ResumeFrom while it trained: a run that ended first would be
// re-opened by it, which is the path of a fresh resume.
func servedInRun(t *testing.T, evs []Event) *report.Result {
	t.Helper()
	if rs, qs := finished(t, evs), only[RunQueued](evs); len(rs) != 1 || len(qs) != 1 {
		t.Fatalf("%d results and %d queued events: the run ended before it served the ResumeFrom", len(rs), len(qs))
	}
	return finished(t, evs)[0]
}

// sameRun fails unless the two results have the same model file and the
// same losses and accuracies per epoch.
func sameRun(t *testing.T, what string, got, want *report.Result) {
	t.Helper()
	if got.Status != report.StatusDone || got.ModelSHA256 != want.ModelSHA256 {
		t.Errorf("%s, resumed from %s in the run: %s model %s; resumed afresh: model %s",
			got.Run, what, got.Status, got.ModelSHA256, want.ModelSHA256)
	}
	if len(got.EpochResults) != len(want.EpochResults) {
		t.Fatalf("%s from %s: the run reports %d epochs, the fresh resume %d", got.Run, what, len(got.EpochResults), len(want.EpochResults))
	}
	for i, e := range got.EpochResults {
		if w := want.EpochResults[i]; e.Epoch != w.Epoch || e.Loss != w.Loss || e.TestAcc != w.TestAcc {
			t.Errorf("%s from %s: epoch %d loss %v acc %v, the fresh resume's %v %v", got.Run, what, e.Epoch, e.Loss, e.TestAcc, w.Loss, w.TestAcc)
		}
	}
}

// A ResumeFrom of the last epoch's end (saved by an earlier run in the
// directory a resumed run keeps) leaves nothing to train, as --resume of
// it does: the run ends at once with the spec's epochs, not one more.
func TestInRunResumeOfTheLastEpochTrainsNoMore(t *testing.T) {
	s := tinySpec(t, "")
	evs, err := collect(t, s, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := finished(t, evs)[0]
	last := ckpt.Ref{Epoch: s.Epochs}
	sent, resumed, after := false, false, 0
	evs, err = driveGrid(t, context.Background(), s, RunOptions{Resume: ckpt.Ref{Epoch: 1}}, func(e Event, cmds chan<- Command) {
		switch e := e.(type) {
		case StepDone:
			if resumed {
				after++
			} else if e.Epoch == s.Epochs && !sent { // once: a second one would re-open the finished run
				cmds <- ResumeFrom(last)
				sent = true
			}
		case RunStarted:
			resumed = e.From() == last
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	got := servedInRun(t, evs)
	if !resumed || after != 0 || len(got.EpochResults) != s.Epochs || got.ModelSHA256 != want.ModelSHA256 {
		t.Fatalf("resumed from %s: %v, then %d steps, %d epochs, model %s; want no step, %d epochs, model %s",
			last.Describe(), resumed, after, len(got.EpochResults), got.ModelSHA256, s.Epochs, want.ModelSHA256)
	}
	dir := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
	if p, _, _ := ckpt.Paths(dir, s.Epochs+1); fileExists(p) {
		t.Errorf("the run saved %s, past its last epoch", p)
	}
}

// resnetlab run --resume of the last epoch trains nothing, so it leaves
// the result file of the run that trained those epochs as it was (its
// train time and speed), and says so.
func TestResumeOfTheLastEpochKeepsTheResult(t *testing.T) {
	s, path, before := doneTinyRun(t)
	evs, err := collect(t, s, RunOptions{Resume: ckpt.Ref{Epoch: s.Epochs}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	said := slices.ContainsFunc(only[Log](evs), func(l Log) bool { return strings.Contains(l.Text, "left as it was") })
	if !bytes.Equal(before, after) || !said {
		t.Errorf("resume of epoch %d: result file unchanged %v, the log says so %v", s.Epochs, bytes.Equal(before, after), said)
	}
	// The resume line names no epoch past the last one.
	resumed := 0
	for _, l := range only[Log](evs) {
		if strings.HasPrefix(l.Text, "resumed from") {
			resumed++
			if !strings.Contains(l.Text, fmt.Sprintf("(it holds all %d epochs)", s.Epochs)) {
				t.Errorf("resume line %q, want it to say the checkpoint holds all %d epochs", l.Text, s.Epochs)
			}
		}
	}
	if resumed != 1 {
		t.Errorf("%d resume lines, want 1", resumed)
	}
}

// A run of another training than the one a done result file records (a
// fresh run, or a resume of that fresh run) that ends after part of its
// epochs (stopped here; interrupted or failed alike) leaves the done run's
// result file as it was and says so: a partial training never replaces the
// record of a complete one.
func TestPartialRunKeepsACompleteResult(t *testing.T) {
	s, path, before := doneTinyRun(t)
	var evs []Event
	// A fresh run (its own checkpoint directory) stopped once its first
	// checkpoint is saved, then a resume of that run stopped at its first
	// step: neither trained every epoch, neither replaces the file.
	stopAt := func(first func(Event) bool) func(Event, chan<- Command) {
		sent := false
		return func(e Event, cmds chan<- Command) {
			if first(e) && !sent {
				sent = true
				cmds <- Stop{}
			}
		}
	}
	for i, run := range []struct {
		opts RunOptions
		stop func(Event) bool
	}{
		{RunOptions{}, func(e Event) bool { c, ok := e.(CheckpointSaved); return ok && c.Epoch == 1 }},
		{RunOptions{Resume: ckpt.Ref{Epoch: 1}}, func(e Event) bool { _, ok := e.(StepDone); return ok }},
	} {
		evs, _ = driveGrid(t, context.Background(), s, run.opts, stopAt(run.stop))
		if rs := finished(t, evs); len(rs) != 1 || rs[0].Status == report.StatusDone {
			t.Fatalf("run %d: %+v, want one run that did not finish", i+2, rs)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		said := slices.ContainsFunc(only[Log](evs), func(l Log) bool {
			return strings.Contains(l.Text, path+" left as it was: it records a complete training (done")
		})
		if !bytes.Equal(before, after) || !said {
			t.Errorf("run %d: result file unchanged %v, the log says so %v", i+2, bytes.Equal(before, after), said)
		}
	}
}

// doneTinyRun trains tinySpec's run to the end and returns the spec, its
// result file and the file's bytes.
func doneTinyRun(t *testing.T) (*spec.Spec, string, []byte) {
	t.Helper()
	s := tinySpec(t, "")
	evs, err := collect(t, s, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := report.ResultPath(s.ResultsDir, finished(t, evs)[0])
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return s, path, b
}
