package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"resnetlab/ckpt"
	"resnetlab/comm"
	"resnetlab/report"
	"resnetlab/runner"
)

// After an interrupt every run that did not finish gets the command line
// that goes on with it, repeating the flags the user gave and the spec as
// typed: the interrupted run with a checkpoint resumes from its last one,
// the runs interrupted before any checkpoint and those not started train
// in one more command; the explanations wrap to the terminal, the
// commands never do.
func TestHowToContinue(t *testing.T) {
	fs := newFlags("run")
	var opts runner.RunOptions
	fs.Bool("headless", false, "")
	fs.Var(refFlag{&opts.Resume}, "resume", "")
	fs.String("device", "", "")
	fs.String("results", "", "")
	fs.Var(listFlag{&opts.Runs}, "run", "")
	if err := fs.Parse([]string{"--device", "cpu", "--results", "my results"}); err != nil {
		t.Fatal(err)
	}
	inv := newInvocation(fs, "experiments/smoke.toml", opts)
	p := newProgress([]string{"torch_ddp-fp32-1", "torch_ddp-fp16-1", "low_level_zero-fp16-1", "gemini-fp16-1"})
	for _, ev := range []runner.Event{
		runner.RunStarted{Info: runner.RunInfo{ID: "torch_ddp-fp32-1"}},
		runner.CheckpointSaved{Run: "torch_ddp-fp32-1", Epoch: 2, Dir: "./checkpoint/smoke/torch_ddp-fp32-1"},
		runner.CheckpointSaved{Run: "torch_ddp-fp32-1", Epoch: 3, Step: 17, Dir: "./checkpoint/smoke/torch_ddp-fp32-1"},
		runner.RunFinished{Run: "torch_ddp-fp32-1", Result: &report.Result{Status: report.StatusInterrupted}},
		runner.RunStarted{Info: runner.RunInfo{ID: "torch_ddp-fp16-1"}},
		runner.RunFinished{Run: "torch_ddp-fp16-1", Err: fmt.Errorf("interrupted: %w", errUIQuit)},
	} {
		p.note(ev)
	}
	got := p.howToContinue(inv, 80)
	want := "" +
		"torch_ddp-fp32-1 was interrupted; its last checkpoint, of epoch 3 step 17, is in\n" +
		"./checkpoint/smoke/torch_ddp-fp32-1. To continue it:\n" +
		"    resnetlab run --device cpu --results 'my results' --resume 3@17 --run torch_ddp-fp32-1 experiments/smoke.toml\n" +
		"To train torch_ddp-fp16-1 (interrupted before any checkpoint, so from the start)\n" +
		"and low_level_zero-fp16-1, gemini-fp16-1 (not started):\n" +
		"    resnetlab run --device cpu --results 'my results' --run torch_ddp-fp16-1,low_level_zero-fp16-1,gemini-fp16-1 experiments/smoke.toml\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// One run, resumed from --resume 2 and interrupted before it saved:
	// that checkpoint, and no --run (the spec has no other run).
	fs = newFlags("run")
	opts = runner.RunOptions{}
	fs.Bool("headless", false, "")
	fs.Var(refFlag{&opts.Resume}, "resume", "")
	if err := fs.Parse([]string{"--headless", "--resume", "2"}); err != nil {
		t.Fatal(err)
	}
	inv = newInvocation(fs, "-odd name.toml", opts)
	p = newProgress([]string{"gemini-fp16-1"})
	p.note(runner.RunStarted{Info: runner.RunInfo{ID: "gemini-fp16-1", CheckpointDir: "ck"}, StartEpoch: 2})
	p.note(runner.RunFinished{Run: "gemini-fp16-1", Err: errors.New("interrupted: interrupt signal received"),
		Result: &report.Result{Status: report.StatusInterrupted}})
	if got, want := p.howToContinue(inv, 0), "gemini-fp16-1 was interrupted; its last checkpoint, of epoch 2, is in ck. To continue it:\n"+
		"    resnetlab run --headless --resume 2 -- '-odd name.toml'\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// A finished run re-opened (the UI's r) that had not started again when
	// the grid ended: its result stands, and the command trains it from the
	// checkpoint that was asked for. Once it starts, it is an ordinary run.
	p = newProgress([]string{"a", "b"})
	p.note(runner.RunFinished{Run: "a", Result: &report.Result{Status: report.StatusDone}})
	p.note(runner.RunFinished{Run: "b", Result: &report.Result{Status: report.StatusDone}})
	p.note(runner.RunQueued{Info: runner.RunInfo{ID: "a", CheckpointDir: "ck/a"}, From: ckpt.Ref{Epoch: 1, Step: 3}})
	if got, want := p.howToContinue(inv, 0), "a was re-opened from the checkpoint of epoch 1 step 3 in ck/a but had not started "+
		"again, so its result is as before. To train it from there:\n    resnetlab run --headless --resume 1@3 --run a -- '-odd name.toml'\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	p.note(runner.RunStarted{Info: runner.RunInfo{ID: "a"}})
	p.note(runner.RunFinished{Run: "a", Result: &report.Result{Status: report.StatusDone}})
	if got := p.howToContinue(inv, 0); got != "" {
		t.Errorf("re-opened run that then finished: got %q, want nothing", got)
	}

	// Not started after --resume 2 (every run of the grid had checkpoint 2):
	// they start from it; runs that finished, done or failed, need nothing.
	p = newProgress([]string{"a", "b", "c"})
	p.note(runner.RunFinished{Run: "a", Result: &report.Result{Status: report.StatusDone}})
	p.note(runner.RunFinished{Run: "b", Err: errors.New("boom"), Result: &report.Result{Status: report.StatusFailed}})
	if got, want := p.howToContinue(inv, 0), "To train c (not started):\n    resnetlab run --headless --resume 2 --run c -- '-odd name.toml'\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	p.note(runner.RunFinished{Run: "c", Result: &report.Result{Status: report.StatusDone}})
	if got := p.howToContinue(inv, 0); got != "" {
		t.Errorf("every run finished, yet:\n%s", got)
	}
}

// --run takes one name or several, separated by commas, and may repeat.
func TestRunFlagList(t *testing.T) {
	var runs []string
	fs := newFlags("run")
	fs.Var(listFlag{&runs}, "run", "")
	if err := fs.Parse([]string{"--run", "a,b", "--run", " c "}); err != nil || strings.Join(runs, " ") != "a b c" {
		t.Errorf("runs %q, %v", runs, err)
	}
	if err := fs.Parse([]string{"--run", "a,,b"}); err == nil {
		t.Error("an empty name must be refused")
	}
}

// In a world that resnetlab launch started, rank 0 says how to go on with
// the launch's own command line (the flags the user gave it, less
// --resume, which the ranks get in comm.LaunchVar) rather than run's,
// and a launch of several nodes says to run it on every node.
func TestHowToContinueLaunch(t *testing.T) {
	fs := newFlags("launch")
	fs.Int("nproc-per-node", 0, "")
	fs.Int("nnodes", 1, "")
	fs.Int("node-rank", 0, "")
	fs.String("master-addr", "127.0.0.1", "")
	fs.Int("master-port", 29500, "")
	fs.Bool("headless", false, "")
	var resume ckpt.Ref
	fs.Var(refFlag{&resume}, "resume", "")
	if err := fs.Parse([]string{"--master-port", "29511", "--resume", "3", "--nproc-per-node", "2", "--master-addr", "node 1", "--headless"}); err != nil {
		t.Fatal(err)
	}
	launch := launchCommand(fs)
	if want := "resnetlab launch --nproc-per-node 2 --master-addr 'node 1' --master-port 29511 --headless"; launch != want {
		t.Fatalf("launchCommand: %q, want %q", launch, want)
	}
	pc, err := comm.JoinWorld(context.Background(), comm.Env{WorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: freePort(t),
		JoinTimeout: 5 * time.Second, Launch: launch}, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	run := newFlags("run")
	opts := runner.RunOptions{World: pc}
	run.Bool("headless", false, "")
	run.Var(refFlag{&opts.Resume}, "resume", "")
	if err := run.Parse([]string{"--headless", "--resume", "3"}); err != nil { // as the launcher starts its ranks
		t.Fatal(err)
	}
	inv := newInvocation(run, "w.toml", opts)
	p := newProgress([]string{"torch_ddp-fp32-2"})
	p.note(runner.RunStarted{Info: runner.RunInfo{ID: "torch_ddp-fp32-2", CheckpointDir: "ck"}, StartEpoch: 3})
	p.note(runner.CheckpointSaved{Run: "torch_ddp-fp32-2", Epoch: 4, Step: 2, Dir: "ck"})
	p.note(runner.RunFinished{Run: "torch_ddp-fp32-2", Result: &report.Result{Status: report.StatusInterrupted}})
	want := "torch_ddp-fp32-2 was interrupted; its last checkpoint, of epoch 4 step 2, is in ck. To continue it:\n" +
		"    " + launch + " --resume 4@2 w.toml\n"
	if got := p.howToContinue(inv, 0); !inv.launched() || got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	inv.nodes = true // every node's launch
	p = newProgress([]string{"torch_ddp-fp32-4"})
	p.note(runner.RunStarted{Info: runner.RunInfo{ID: "torch_ddp-fp32-4", CheckpointDir: "ck"}})
	p.note(runner.RunFinished{Run: "torch_ddp-fp32-4", Result: &report.Result{Status: report.StatusInterrupted}})
	want = "To train torch_ddp-fp32-4 (interrupted before any checkpoint, so from the start), on every node (each with its own --node-rank):\n" +
		"    " + launch + " --resume 3 w.toml\n"
	if got := p.howToContinue(inv, 0); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
