package runner

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

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
