package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

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
