package runner

import (
	"context"
	"errors"
	"fmt"

	"resnetlab/ckpt"
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
			j.pause(&paused)
		case Resume:
			j.unpause(&paused)
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
			j.resumeFrom(c.Ref(), &paused)
		}
	}
}

// pause serves Pause. Every Pause is answered with Paused, also one that
// finds the run paused already: a front end that shows "pausing" until
// the runner confirms then always hears back, whatever it believed.
func (j *job) pause(paused *bool) {
	*paused = true
	j.emit(Paused{Run: j.info.ID, Epoch: j.epoch + 1, Step: j.step})
}

// unpause serves Resume, answered with Resumed for the same reason.
func (j *job) unpause(paused *bool) {
	*paused = false
	j.emit(Resumed{Run: j.info.ID})
}

// resumeFrom serves ResumeFrom: the run continues from ref as a fresh
// resnetlab run --resume ref would, training at once. A paused run is
// un-paused too: RunStarted means that the run trains, and a run that
// stayed paused behind it would wait for a Resume no front end knows to
// send. A refused resume changes nothing, the pause included.
func (j *job) resumeFrom(ref ckpt.Ref, paused *bool) {
	if err := j.resume(ref); err != nil {
		j.logf(LevelError, "%v", err)
		return
	}
	*paused = false
	j.started(ref)
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
