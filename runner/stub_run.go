package runner

// TEMPORARY: placeholders so the CLI compiles until the orchestrator's
// training loop replaces this file.

import (
	"context"
	"errors"
)

// RunSpec runs every cell of spec, publishing events and obeying cmds. It
// returns when every run has finished; it does not close events (the caller
// does, after RunSpec returns). It writes each run's result with
// WriteResult. The error is non-nil when a run failed (including a missed
// target_acc) or the spec could not start.
func RunSpec(ctx context.Context, spec *Spec, opts RunOptions, events chan<- Event, cmds <-chan Command) error {
	return errors.New("not implemented yet")
}

// Eval measures the test accuracy of a saved model: overall and per class.
func Eval(ctx context.Context, opts EvalOptions) (acc float64, perClass []float64, err error) {
	return 0, nil, errors.New("not implemented yet")
}
