package runner

import (
	"context"
	"errors"
	"fmt"
)

// The commands a run serves between steps (pause, resume, checkpoint now,
// stop, quit, resume from) and how it ends on Stop, Quit or Ctrl-C.

// errStopped ends a run that a Stop command or Ctrl-C interrupted.
var errStopped = errors.New("stopped")

// control serves the commands that arrived, blocking while paused.
func (j *job) control(ctx context.Context) error {
	if j.world != nil {
		return j.worldControl(ctx)
	}
	paused := false
	for {
		var cmd Command
		if paused {
			select {
			case cmd = <-j.cmds:
			case <-ctx.Done():
				return j.ctxDone(ctx)
			}
		} else {
			select {
			case cmd = <-j.cmds:
			case <-ctx.Done():
				return j.ctxDone(ctx)
			default:
				return nil
			}
		}
		switch c := cmd.(type) {
		case Pause:
			if !paused {
				paused = true
				j.emit(Paused{Run: j.info.ID, Epoch: j.epoch + 1, Step: j.step})
			}
		case Resume:
			if paused {
				paused = false
				j.emit(Resumed{Run: j.info.ID})
			}
		case CheckpointNow:
			if err := j.checkpoint(); err != nil {
				j.logf(LevelError, "checkpoint failed: %v", err)
			}
		case Quit:
			return j.quit(c.Checkpoint)
		case Stop:
			if c.Checkpoint {
				if err := j.checkpoint(); err != nil {
					return fmt.Errorf("checkpoint before stopping: %w", err)
				}
			}
			return errStopped
		case ResumeFrom:
			if err := j.resume(c.Ref()); err != nil {
				j.logf(LevelError, "%v", err)
				continue
			}
			j.started(c.Ref())
		}
	}
}

// ctxDone answers Ctrl-C noticed while serving commands (one process: a
// world of processes agrees on it first, worldcontrol.go).
func (j *job) ctxDone(ctx context.Context) error {
	return j.interrupted(ctx)
}

// errQuit is how a run ends on Quit: interrupted, as by Ctrl-C (it wraps
// context.Canceled), so the result says interrupted and the exit code is
// 130 whichever way the user quit.
var errQuit error = quitError{}

type quitError struct{}

func (quitError) Error() string        { return "interrupted: the grid was quit" }
func (quitError) Is(target error) bool { return target == context.Canceled }

// quit ends the run for Quit, checkpointing first if asked.
func (j *job) quit(checkpoint bool) error {
	if checkpoint {
		if err := j.checkpoint(); err != nil {
			return fmt.Errorf("%w; the checkpoint failed: %w", errQuit, err)
		}
	}
	return errQuit
}

// interrupted handles Ctrl-C: checkpoint if the run keeps checkpoints.
func (j *job) interrupted(ctx context.Context) error {
	if !noCheckpoints(j.cell.CheckpointDir) && j.spec.Interval > 0 {
		if err := j.checkpoint(); err != nil {
			return fmt.Errorf("interrupted (%w); the checkpoint failed too: %w", context.Cause(ctx), err)
		}
	}
	return fmt.Errorf("interrupted: %w", context.Cause(ctx))
}
