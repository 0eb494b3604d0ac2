package runner

import (
	"context"
	"fmt"
	"resnetlab/ckpt"
	"slices"
	"testing"
	"time"
)

// ResumeFrom on a paused run restores the checkpoint and trains on at
// once, to the model a fresh --resume gives: RunStarted, which front ends
// take for "training", is not followed by a run that waits for a Resume.
// A paused run that did not train on would be interrupted by the deadline.
func TestResumeFromWhilePausedTrains(t *testing.T) {
	s := tinySpec(t, "")
	from := ckpt.Ref{Epoch: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	paused, resumed, after, spe := false, false, 0, 0
	evs, err := driveGrid(t, ctx, s, RunOptions{}, func(e Event, cmds chan<- Command) {
		switch e := e.(type) {
		case StepDone:
			if resumed {
				after++
			} else if e.Epoch == 2 && e.Step == 1 && !paused {
				cmds <- Pause{}
			}
		case Paused:
			paused = true
			cmds <- ResumeFrom(from)
		case RunStarted:
			resumed, spe = paused && e.From() == from, e.Info.StepsPerEpoch
		}
	})
	if err != nil {
		t.Fatalf("%v (paused %v, resumed %v, %d steps after the resume)", err, paused, resumed, after)
	}
	got := servedInRun(t, evs)
	if want := (s.Epochs - from.Epoch) * spe; !resumed || after != want {
		t.Fatalf("paused %v, resumed %v, then %d steps; want %d", paused, resumed, after, want)
	}
	evs, err = collect(t, s, RunOptions{Resume: from}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameRun(t, from.Describe(), got, finished(t, evs)[0])
}

// Every Pause and every Resume is answered, also one that finds the run
// in that state already, so a front end waiting for the answer never
// waits for ever, whatever it believed the run's state to be.
func TestEveryPauseAndResumeIsAnswered(t *testing.T) {
	s := tinySpec(t, "")
	s.Epochs = 1
	sent := false
	evs, err := driveGrid(t, context.Background(), s, RunOptions{}, func(e Event, cmds chan<- Command) {
		if _, ok := e.(StepDone); ok && !sent {
			sent = true
			for _, c := range []Command{Resume{}, Pause{}, Pause{}, Resume{}} {
				cmds <- c
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var answers []string
	for _, e := range evs {
		switch e.(type) {
		case Paused, Resumed:
			answers = append(answers, fmt.Sprintf("%T", e))
		}
	}
	if want := []string{"runner.Resumed", "runner.Paused", "runner.Paused", "runner.Resumed"}; !slices.Equal(answers, want) {
		t.Fatalf("answers %v, want %v", answers, want)
	}
}
