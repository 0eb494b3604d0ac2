package runner

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"resnetlab/comm"
	"resnetlab/report"
	"resnetlab/spec"
)

// TestWorldCommands: rank 0's front end pauses, checkpoints, resumes and
// quits a world of two processes (goroutines here): every rank pauses and
// resumes at the same step, the paused world keeps meeting without
// breaking, rank 0 saves the checkpoint while rank 1 takes part, both end
// interrupted, and rank 0's result and events hold rank 1's memory.
func TestWorldCommands(t *testing.T) {
	old := pausePoll
	pausePoll = 20 * time.Millisecond
	t.Cleanup(func() { pausePoll = old })
	s := tinySpec(t, "[[run]]\nplugin = \"torch_ddp\"\ngpus = 2\n")
	pcs := world2(t)

	ev1 := make(chan Event, 4096)
	var got1 []Event
	var wg sync.WaitGroup
	wg.Go(func() {
		for e := range ev1 {
			got1 = append(got1, e)
		}
	})
	err1 := make(chan error, 1)
	go func() {
		err1 <- RunSpec(context.Background(), s, RunOptions{Headless: true, World: pcs[1]}, ev1, make(chan Command))
		close(ev1)
	}()
	paused := false
	got0, err0 := driveGrid(t, context.Background(), s, RunOptions{World: pcs[0]}, func(e Event, cmds chan<- Command) {
		switch e := e.(type) {
		case StepDone:
			if e.Epoch == 1 && e.Step == 1 && !paused {
				paused = true
				cmds <- Pause{}
			}
		case Paused:
			go func() { // while paused: the world meets every pausePoll
				time.Sleep(15 * pausePoll)
				cmds <- CheckpointNow{}
				cmds <- Resume{}
			}()
		case Resumed:
			cmds <- Quit{}
		}
	})
	wg.Wait()
	if !errors.Is(err0, context.Canceled) || !errors.Is(<-err1, context.Canceled) {
		t.Fatalf("rank 0 ended with %v: want both ranks interrupted", err0)
	}
	p0, p1 := only[Paused](got0), only[Paused](got1)
	if len(p0) != 1 || len(p1) != 1 || p0[0] != p1[0] {
		t.Errorf("paused: rank 0 %v, rank 1 %v: want once each, at the same step", p0, p1)
	}
	if len(only[Resumed](got0)) != 1 || len(only[Resumed](got1)) != 1 {
		t.Error("not every rank resumed once")
	}
	var at []CheckpointSaved // the save taken while paused: 1 or 2 steps into epoch 1 (Pause lands a step late at most)
	for _, c := range only[CheckpointSaved](got0) {
		if len(p0) == 1 && c.Epoch == p0[0].Epoch && c.Step == p0[0].Step && c.Step > 0 {
			at = append(at, c)
		}
	}
	if len(at) != 1 || len(only[CheckpointSaved](got1)) != 0 {
		t.Errorf("checkpoints: rank 0 %v, rank 1 %v: want one by rank 0 where it paused (%v)", only[CheckpointSaved](got0), only[CheckpointSaved](got1), p0)
	}
	var res *report.Result
	for _, f := range only[RunFinished](got0) {
		res = f.Result
	}
	if res == nil || res.Status != report.StatusInterrupted || len(res.PeakDeviceBytes) != 2 || res.PeakDeviceBytes[1] == 0 {
		t.Fatalf("rank 0's result: %+v", res)
	}
	rank1 := 0
	for _, u := range only[MemoryUsage](got0) {
		if u.Rank == 1 {
			rank1++
		}
	}
	if rank1 == 0 || len(only[MemoryUsage](got1)) != 0 {
		t.Errorf("rank 1's memory: %d events on rank 0, %d on rank 1", rank1, len(only[MemoryUsage](got1)))
	}
}

// only is the events of type E in evs.
func only[E Event](evs []Event) []E {
	var out []E
	for _, e := range evs {
		if x, ok := e.(E); ok {
			out = append(out, x)
		}
	}
	return out
}

// TestWorldRefusedResumeSaysTheCommand: the UI's resume from a checkpoint
// is refused in a world of processes, saying the command that resumes
// it: resnetlab launch's own command line when a launch started the world
// (comm.Env.Launch), run's on every rank otherwise.
func TestWorldRefusedResumeSaysTheCommand(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	const launch = "resnetlab launch --nproc-per-node 2 --headless"
	pc, err := comm.JoinWorld(context.Background(), comm.Env{WorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: port,
		JoinTimeout: 5 * time.Second, Launch: launch}, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	events := make(chan Event, 1)
	j := &job{world: pc, spec: &spec.Spec{File: "exp/w.toml"}, events: events}
	if code := j.commandCode(ResumeFrom{Epoch: 2, Step: 21}); code != wcNone {
		t.Errorf("ResumeFrom gave code %d, want none", code)
	}
	l, ok := (<-events).(Log)
	if want := "(" + launch + " --resume 2@21 exp/w.toml)"; !ok || !strings.HasSuffix(l.Text, want) {
		t.Errorf("refusal %q, want it to end %q", l.Text, want)
	}
}
