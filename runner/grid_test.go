package runner

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"resnetlab/ckpt"
	"resnetlab/device"
	"resnetlab/report"
	"resnetlab/spec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// twoRuns is a tiny grid of two different runs (1 and 2 ranks).
const twoRuns = `[[run]]
plugin = "torch_ddp"
precision = "fp32"
gpus = 1
[[run]]
plugin = "low_level_zero"
precision = "fp16"
gpus = 2`

const runA, runB = "torch_ddp-fp32-1", "low_level_zero-fp16-2"

// driveGrid runs s with RunSpec and hands every event to react, which may
// send commands; it fails the test when the grid does not end in time.
func driveGrid(t *testing.T, ctx context.Context, s *spec.Spec, opts RunOptions,
	react func(e Event, cmds chan<- Command)) ([]Event, error) {
	t.Helper()
	events := make(chan Event) // unbuffered: react sees each event before the run goes on
	cmds := make(chan Command, 16)
	var got []Event
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range events {
			got = append(got, e)
			if react != nil {
				react(e, cmds)
			}
		}
	}()
	res := make(chan error, 1)
	go func() { res <- RunSpec(ctx, s, opts, events, cmds) }()
	var err error
	select {
	case err = <-res:
	case <-time.After(2 * time.Minute):
		t.Fatal("the grid did not end within 2 minutes")
	}
	close(events)
	<-done
	return got, err
}

func resultsByRun(t *testing.T, evs []Event) map[string]*report.Result {
	t.Helper()
	m := map[string]*report.Result{}
	for _, r := range finished(t, evs) {
		m[r.Run] = r
	}
	return m
}

// Two runs trained at once give the same models and curves as the same
// runs one after another (CPU results do not depend on the worker count).
// Each run is paused as soon as it starts: only concurrent runs can both
// be paused at the same time, which proves they overlapped (run one after
// another, the grid would wait forever). Resuming only A then shows A's
// steps while B stays paused, and the two runs' steps interleave.
func TestConcurrentMatchesSequentialAndOverlaps(t *testing.T) {
	seq := tinySpec(t, twoRuns)
	evs, err := driveGrid(t, context.Background(), seq, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := resultsByRun(t, evs)

	con := tinySpec(t, "concurrent = true\n"+twoRuns)
	paused := map[string]bool{}
	aStepsWhileBPaused, resumedB := 0, false
	evs, err = driveGrid(t, context.Background(), con, RunOptions{}, func(e Event, cmds chan<- Command) {
		switch e := e.(type) {
		case RunStarted:
			cmds <- To{Run: e.Info.ID, Cmd: Pause{}}
		case Paused:
			paused[e.Run] = true
			if paused[runA] && paused[runB] { // both alive and held at once
				cmds <- To{Run: runA, Cmd: Resume{}}
			}
		case StepDone:
			if e.Run == runB && paused[runB] && !resumedB {
				t.Errorf("run %s stepped while paused", runB)
			}
			if e.Run == runA && !resumedB {
				if aStepsWhileBPaused++; aStepsWhileBPaused == 3 {
					resumedB = true
					cmds <- To{Run: runB, Cmd: Resume{}}
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !paused[runA] || !paused[runB] || aStepsWhileBPaused < 3 {
		t.Fatalf("paused %v, %d steps of A while B was paused", paused, aStepsWhileBPaused)
	}
	got := resultsByRun(t, evs)
	for id, w := range want {
		g := got[id]
		if g == nil || g.Status != "done" || g.ModelSHA256 != w.ModelSHA256 {
			t.Fatalf("%s: concurrent result %+v, want model %s as sequentially", id, g, w.ModelSHA256)
		}
		for i, e := range g.EpochResults {
			if e.Loss != w.EpochResults[i].Loss || e.TestAcc != w.EpochResults[i].TestAcc {
				t.Fatalf("%s epoch %d: %+v concurrently, %+v sequentially", id, e.Epoch, e, w.EpochResults[i])
			}
		}
		if _, err := os.Stat(report.ResultPath(con.ResultsDir, g)); err != nil {
			t.Fatalf("result file of %s: %v", id, err)
		}
	}
	// Interleaving: after B resumed, its steps and A's alternate in the stream.
	switches, last := 0, ""
	for _, e := range evs {
		if sd, ok := e.(StepDone); ok {
			if last != "" && sd.Run != last {
				switches++
			}
			last = sd.Run
		}
	}
	if switches < 2 {
		t.Fatalf("the steps of the two runs switched %d times in the event stream, want them interleaved", switches)
	}
}

// A run that fails (its checkpoint directory cannot be made) ends alone:
// the other trains to the end, each result says which, and RunSpec's
// error names the failed run only.
func TestConcurrentFailingRunDoesNotStopTheOther(t *testing.T) {
	s := tinySpec(t, "concurrent = true\n"+twoRuns)
	blocker := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", runB)
	if err := os.WriteFile(blocker, nil, 0o644); err != nil { // a file where B's directory should be
		t.Fatal(err)
	}
	evs, err := driveGrid(t, context.Background(), s, RunOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), runB+": ") || strings.Contains(err.Error(), runA+": ") {
		t.Fatalf("err = %v, want %s's failure only", err, runB)
	}
	rs := resultsByRun(t, evs)
	if rs[runA] == nil || rs[runA].Status != "done" || len(rs[runA].EpochResults) != 2 {
		t.Fatalf("%s: %+v, want done after 2 epochs", runA, rs[runA])
	}
	if rs[runB] == nil || rs[runB].Status != "failed" {
		t.Fatalf("%s: %+v, want failed", runB, rs[runB])
	}
	b, err := os.ReadFile(report.ResultPath(s.ResultsDir, rs[runA]))
	if err != nil || !strings.Contains(string(b), `"status": "done"`) {
		t.Fatalf("result file of %s: %v\n%s", runA, err, b)
	}
	// B failed before its first step: reported, not recorded over the past.
	if _, err := os.Stat(report.ResultPath(s.ResultsDir, rs[runB])); !os.IsNotExist(err) {
		t.Fatalf("%s failed before training, yet has a result file (%v)", runB, err)
	}
}

// Ctrl-C while two runs train interrupts both, and each saves a
// checkpoint first.
func TestConcurrentCtrlCInterruptsEveryRun(t *testing.T) {
	s := tinySpec(t, "concurrent = true\n"+twoRuns)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	stepped := map[string]bool{}
	sent := false
	evs, err := driveGrid(t, ctx, s, RunOptions{}, func(e Event, _ chan<- Command) {
		if sd, ok := e.(StepDone); ok {
			stepped[sd.Run] = true
		}
		if stepped[runA] && stepped[runB] && !sent {
			sent = true
			if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
				t.Error(err)
			}
			<-ctx.Done()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the interruption", err)
	}
	rs := resultsByRun(t, evs)
	saved := map[string]bool{}
	for _, e := range evs {
		if c, ok := e.(CheckpointSaved); ok {
			saved[c.Run] = true
		}
	}
	for _, id := range []string{runA, runB} {
		if rs[id] == nil || rs[id].Status != "interrupted" || !saved[id] {
			t.Fatalf("%s: result %+v, checkpoint saved %v; want interrupted with a checkpoint", id, rs[id], saved[id])
		}
	}
	// resnetlab compare tells them from failed runs too.
	if table := report.CompareTable([]*report.Result{rs[runA], rs[runB]}); strings.Count(table, "interrupted  ") != 0 ||
		strings.Count(table, " interrupted\n") != 2 || strings.Contains(table, "failed") {
		t.Fatalf("compare table:\n%s", table)
	}
}

// ResumeFrom on a finished run re-opens it: it trains again from that
// epoch to the end, its result is replaced, and the model is the one a
// straight run gives. A ResumeFrom without a checkpoint is refused and
// leaves the result alone.
func TestResumeFromReopensFinishedRun(t *testing.T) {
	straight := tinySpec(t, "")
	evs, err := driveGrid(t, context.Background(), straight, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := finished(t, evs)[0].ModelSHA256

	s := tinySpec(t, "")
	const id = "torch_ddp-fp32-1"
	finishes := 0
	evs, err = driveGrid(t, context.Background(), s, RunOptions{StayOpen: true}, func(e Event, cmds chan<- Command) {
		switch e := e.(type) {
		case CheckpointSaved:
			if e.Epoch == 1 && finishes == 0 {
				cmds <- To{Run: id, Cmd: Stop{}} // the run ends "stopped" after epoch 1
			}
		case RunFinished:
			finishes++
			switch finishes {
			case 1:
				if e.Result.Status != "stopped" {
					t.Errorf("first end: %s, want stopped", e.Result.Status)
				}
				cmds <- To{Run: id, Cmd: ResumeFrom{Epoch: 7}} // no such checkpoint: refused
				cmds <- To{Run: id, Cmd: ResumeFrom{Epoch: 1}}
			case 2:
				close(cmds) // nothing more to ask: RunSpec may return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var refused, reopened bool
	var starts []int
	var queuedFrom []ckpt.Ref
	for _, e := range evs {
		switch e := e.(type) {
		case RunQueued:
			queuedFrom = append(queuedFrom, e.From)
		case Log:
			refused = refused || strings.Contains(e.Text, "checkpoint 7 is outside epochs 1..2")
			reopened = reopened || strings.Contains(e.Text, "re-opening "+id+" from the checkpoint of epoch 1")
		case RunStarted:
			starts = append(starts, e.StartEpoch)
		}
	}
	if !refused || !reopened || len(starts) != 2 || starts[1] != 1 {
		t.Fatalf("refused %v, reopened %v, starts %v", refused, reopened, starts)
	}
	if len(queuedFrom) != 2 || !queuedFrom[0].IsZero() || queuedFrom[1] != (ckpt.Ref{Epoch: 1}) {
		t.Errorf("queued from %v, want the first queueing from nothing and the re-opening from epoch 1", queuedFrom)
	}
	r := finished(t, evs)[1]
	if r.Status != "done" || r.ModelSHA256 != want || len(r.EpochResults) != 2 {
		t.Fatalf("re-opened run: %+v, want done with model %s", r, want)
	}
	b, err := os.ReadFile(report.ResultPath(s.ResultsDir, r))
	if err != nil || !strings.Contains(string(b), `"status": "done"`) || !strings.Contains(string(b), want) {
		t.Fatalf("result file not replaced: %v\n%s", err, b)
	}
}

// The device rule of concurrent = true.
func TestPlanGrid(t *testing.T) {
	s := tinySpec(t, "concurrent = true\n"+twoRuns)
	cells, _, err := s.Cells()
	if err != nil {
		t.Fatal(err)
	}
	p := planGridOn(s, cells, "cpu", 0)
	if p.slots != 2 || p.places[0].cpuRanks != 3 || p.places[1].cpuRanks != 3 || !strings.Contains(p.notice, "2 runs train at once on the CPU") {
		t.Fatalf("cpu: %+v", p)
	}
	bp := device.Plan{Kind: "cpu"}
	bp.Place(p.places[1].share(), 2)
	if want := max(1, runtime.GOMAXPROCS(0)/3); bp.Workers != want {
		t.Fatalf("cpu workers per rank %d, want %d", bp.Workers, want)
	} else if each := strings.Replace("("+strconv.Itoa(want)+" workers each)", "(1 workers", "(1 worker", 1); !strings.HasSuffix(p.notice, each) {
		t.Fatalf("cpu notice %q, want it to end %q", p.notice, each)
	}
	p = planGridOn(s, cells, "cuda", 4) // 3 ranks fit 4 GPUs
	if p.slots != 2 || p.places[0].firstDevice != 0 || p.places[1].firstDevice != 1 {
		t.Fatalf("cuda 4 GPUs: %+v", p)
	}
	cp := device.Plan{Kind: "cuda", Devices: []int{0, 1}}
	cp.Place(p.places[1].share(), 2)
	if cp.Devices[0] != 1 || cp.Devices[1] != 2 {
		t.Fatalf("run B's ranks on GPUs %v, want [1 2]", cp.Devices)
	}
	p = planGridOn(s, cells, "cuda", 2) // 3 ranks on 2 GPUs, sharing allowed
	if p.slots != 2 || !strings.Contains(p.notice, "GPUs are shared") {
		t.Fatalf("cuda shared: %+v", p)
	}
	s.ShareDevices = false
	p = planGridOn(s, cells, "cuda", 2)
	if p.slots != 1 || p.level != "warn" || !strings.Contains(p.notice, "they train one after another") {
		t.Fatalf("cuda, no sharing: %+v", p)
	}
	s.Concurrent = false
	if p = planGridOn(s, cells, "cpu", 0); p.slots != 1 || p.notice != "" {
		t.Fatalf("not concurrent: %+v", p)
	}
}

// The race behind a ResumeFrom sent on RunFinished: the command can reach
// the run's inbox before the scheduler learns that the job has ended. Once
// it learns, leftovers are routed again: the ResumeFrom re-opens the run,
// anything else is reported as ignored, nothing is lost or left waiting.
func TestLeftoverResumeFromReopens(t *testing.T) {
	s := tinySpec(t, "")
	if _, err := collect(t, s, RunOptions{}, nil); err != nil { // writes the checkpoints
		t.Fatal(err)
	}
	cells, _, err := s.Cells()
	if err != nil {
		t.Fatal(err)
	}
	g := &gridRun{spec: s, cells: cells}
	if g.train, g.test, err = loadData(s); err != nil {
		t.Fatal(err)
	}
	g.init()
	g.queue, g.state[0] = nil, cellEnded // the job has ended; its inbox holds:
	g.inbox[0] <- Pause{}
	g.inbox[0] <- ResumeFrom{Epoch: 1}
	g.rerouteLeftovers(context.Background(), 0)
	if g.state[0] != cellQueued || len(g.queue) != 1 || g.queue[0] != 0 || g.resume[0] != (ckpt.Ref{Epoch: 1}) {
		t.Fatalf("state %v queue %v resume %v: want the run queued to resume from epoch 1", g.state[0], g.queue, g.resume[0])
	}
	if len(g.inbox[0]) != 0 {
		t.Fatalf("%d commands still wait in the inbox", len(g.inbox[0]))
	}
}
