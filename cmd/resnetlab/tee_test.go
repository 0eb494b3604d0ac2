package main

import (
	"testing"
	"time"

	"resnetlab/report"
	"resnetlab/runner"
)

// The runner never waits for the UI: with nobody reading the UI's side,
// the tee takes every event the runner sends at once and queues it; the UI
// then gets them all, in order, and the results are kept for the summary.
func TestTeeNeverBlocksTheRunner(t *testing.T) {
	in := make(chan runner.Event) // unbuffered: a send waits for the tee itself
	tee := newTee(in, newProgress(nil))
	const n = 20000
	sent := make(chan time.Duration)
	go func() {
		t0 := time.Now()
		for i := range n {
			in <- runner.StepDone{Run: "a", Step: i}
		}
		in <- runner.RunFinished{Run: "a", Result: &report.Result{Run: "a", Status: report.StatusDone}}
		sent <- time.Since(t0)
	}()
	select {
	case d := <-sent:
		t.Logf("%d events sent in %v with no UI reading", n+1, d)
	case <-time.After(10 * time.Second):
		t.Fatal("the runner's sends wait for the UI to read")
	}
	close(in)
	for i := range n {
		ev := <-tee.out
		if s, ok := ev.(runner.StepDone); !ok || s.Step != i {
			t.Fatalf("event %d: %#v", i, ev)
		}
	}
	if _, ok := (<-tee.out).(runner.RunFinished); !ok {
		t.Fatal("RunFinished not forwarded last")
	}
	if _, ok := <-tee.out; ok {
		t.Fatal("the UI's channel stays open after the runner's closed")
	}
	if tee.failedRuns(); len(tee.results) != 1 || tee.queued < n {
		t.Errorf("%d results kept, longest queue %d (want 1 and the %d events queued)", len(tee.results), tee.queued, n)
	}
}

// Once the UI has quit, the tee drops what it queued and keeps reading, so
// the runs still winding down are not blocked; their results still count.
func TestTeeAfterTheUIQuit(t *testing.T) {
	in := make(chan runner.Event)
	tee := newTee(in, newProgress(nil))
	in <- runner.StepDone{Run: "a"}
	tee.stopForwarding()
	for range 1000 {
		in <- runner.StepDone{Run: "a"}
	}
	in <- runner.RunFinished{Run: "a", Err: errFake{}}
	close(in)
	if got := tee.failedRuns(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("failed runs %v, want [a]", got)
	}
}

type errFake struct{}

func (errFake) Error() string { return "fake" }
