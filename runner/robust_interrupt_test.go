package runner

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/spec"
	"strings"
	"syscall"
	"testing"
)

// interruptAfterFirstStep runs s under signal.NotifyContext, as the CLI
// does, and sends this process SIGINT (Ctrl-C) once the first step is
// published. driveGrid's events channel is unbuffered and react waits for
// the context to be cancelled before the next event is read, so the run
// cannot train past the step that follows.
func interruptAfterFirstStep(t *testing.T, s *spec.Spec) ([]Event, error) {
	t.Helper()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sent := false
	return driveGrid(t, ctx, s, RunOptions{}, func(e Event, _ chan<- Command) {
		if _, ok := e.(StepDone); ok && !sent {
			sent = true
			if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
				t.Error(err)
				return
			}
			<-ctx.Done()
		}
	})
}

// A run ended by Ctrl-C says "interrupted" (not "failed"): in its result
// and result file, and the error still matches context.Canceled, which
// the CLI turns into its interrupted exit code. It saved where it was.
func TestCtrlCResultIsInterrupted(t *testing.T) {
	s := tinySpec(t, "")
	evs, err := interruptAfterFirstStep(t, s)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted: interrupt signal received") {
		t.Fatalf("err = %v, want the interruption", err)
	}
	rs := finished(t, evs)
	if len(rs) != 1 || rs[0].Status != "interrupted" || !strings.Contains(rs[0].Error, "interrupt signal received") {
		t.Fatalf("results %+v, want one interrupted", rs)
	}
	b, rerr := os.ReadFile(report.ResultPath(s.ResultsDir, rs[0]))
	if rerr != nil || !strings.Contains(string(b), `"status": "interrupted"`) {
		t.Fatalf("result file: %v\n%s", rerr, b)
	}
	steps, saved := 0, false
	for _, e := range evs {
		switch e := e.(type) {
		case StepDone:
			steps++
		case CheckpointSaved:
			saved = e.Epoch == 1
		}
	}
	if steps != 1 || !saved {
		t.Fatalf("%d steps published, checkpoint of epoch 1 saved: %v; want 1 step and the checkpoint", steps, saved)
	}
}

// When the checkpoint taken on Ctrl-C fails, the run is still
// interrupted, and the error says both things.
func TestCtrlCWithFailingCheckpoint(t *testing.T) {
	s := tinySpec(t, "")
	dir := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
	// A directory where the save (taken one step into epoch 1) renames its
	// file: the save fails.
	for _, ref := range []ckpt.Ref{{Epoch: 1, Step: 1}} {
		_, op, _ := ref.Paths(dir)
		if err := os.MkdirAll(op, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := interruptAfterFirstStep(t, s)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "the checkpoint failed too") {
		t.Fatalf("err = %v", err)
	}
	if rs := finished(t, evs); len(rs) != 1 || rs[0].Status != "interrupted" ||
		!strings.Contains(rs[0].Error, "interrupted (interrupt signal received); the checkpoint failed too: ") {
		t.Fatalf("results %+v", rs)
	}
}

// A run interrupted mid-epoch and resumed in a new run reports the same
// per-epoch losses as an uninterrupted one: the checkpoint carries the
// running sums of the epoch in progress, not only the weights.
func TestMidEpochResumeKeepsTheEpochLoss(t *testing.T) {
	want := straightRun(t)

	s := tinySpec(t, "")
	if _, err := interruptAfterFirstStep(t, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the interruption", err)
	}
	evs, err := collect(t, s, RunOptions{Resume: ckpt.Ref{Epoch: 1, Step: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := finished(t, evs)[0]
	if got.ModelSHA256 != want.ModelSHA256 {
		t.Fatalf("resumed model %s, straight %s", got.ModelSHA256, want.ModelSHA256)
	}
	if len(got.EpochResults) != len(want.EpochResults) {
		t.Fatalf("resumed run reports %d epochs, want %d", len(got.EpochResults), len(want.EpochResults))
	}
	for i, e := range got.EpochResults {
		if w := want.EpochResults[i]; e.Loss != w.Loss || e.TestAcc != w.TestAcc {
			t.Errorf("epoch %d: loss %v acc %v, straight run %v %v", e.Epoch, e.Loss, e.TestAcc, w.Loss, w.TestAcc)
		}
	}
}
