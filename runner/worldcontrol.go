package runner

import (
	"context"
	"fmt"
	"time"

	"resnetlab/comm"
)

// The step boundary of a world of processes. Every rank must stop,
// pause, checkpoint or quit at the same step: a rank alone in a
// collective (a checkpoint's gather) while the others train would break
// the world. So at every boundary the ranks sum a small vector: each
// adds 1 to the first element when it was interrupted (Ctrl-C, SIGTERM;
// a launcher may signal them a step apart), and rank 0, the only rank
// with a front end, puts the command it took from its inbox in the
// others. Every rank then serves the same command; one more round
// follows while commands come or the run is paused. A paused world keeps
// meeting every pausePoll, so no rank waits in a collective for long and
// an interrupted rank is heard within pausePoll.

// pausePoll is how long a paused rank 0 waits for a command before the
// ranks meet again.
var pausePoll = 500 * time.Millisecond

// Command codes on the wire (the vector's second element).
const (
	wcNone = iota
	wcPause
	wcResume
	wcCheckpoint
	wcStop
	wcStopCheckpoint
	wcQuit
	wcQuitCheckpoint
)

// worldControl is control for a rank of a world of processes.
func (j *job) worldControl(ctx context.Context) error {
	paused := false
	for {
		code := wcNone
		if j.world.Rank() == 0 {
			code = j.takeCommand(ctx, paused)
		}
		code, interrupted, err := j.agree(ctx, code)
		if err != nil {
			return err
		}
		if interrupted {
			return j.interrupted(j.interruptCause(ctx))
		}
		if code == wcNone && !paused {
			return nil
		}
		if err := j.serve(code, &paused); err != nil {
			return err
		}
	}
}

// takeCommand is rank 0's next command, as a code: at once when training,
// within pausePoll when paused (wcNone when none came).
func (j *job) takeCommand(ctx context.Context, paused bool) int {
	var wait <-chan time.Time
	if paused {
		wait = time.After(pausePoll)
	}
	for {
		var cmd Command
		if wait == nil {
			select {
			case cmd = <-j.cmds:
			default:
				return wcNone
			}
		} else {
			select {
			case cmd = <-j.cmds:
			case <-ctx.Done(): // the agreement hears it
				return wcNone
			case <-wait:
				return wcNone
			}
		}
		if code := j.commandCode(cmd); code != wcNone {
			return code
		}
	}
}

// commandCode encodes cmd; ResumeFrom is refused (see worldControl's
// doc in docs/multigpu.md: every rank would have to read the checkpoint).
func (j *job) commandCode(cmd Command) int {
	switch c := cmd.(type) {
	case Pause:
		return wcPause
	case Resume:
		return wcResume
	case CheckpointNow:
		return wcCheckpoint
	case Stop:
		if c.Checkpoint {
			return wcStopCheckpoint
		}
		return wcStop
	case Quit:
		if c.Checkpoint {
			return wcQuitCheckpoint
		}
		return wcQuit
	case ResumeFrom:
		again := fmt.Sprintf("resnetlab run --resume %s on every rank", c.Ref())
		if l := j.world.Launcher(); l != "" { // resnetlab launch started the world: its command line
			again = fmt.Sprintf("%s --resume %s %s", l, c.Ref(), j.spec.File)
		}
		j.logf(LevelWarn, "resume from %s ignored: a run of %d processes resumes only when it starts (%s)",
			c.Ref().Describe(), j.world.WorldSize(), again)
	}
	return wcNone
}

// agree sums the ranks' interruption flags and rank 0's command code.
func (j *job) agree(ctx context.Context, code int) (int, bool, error) {
	v := []float32{0, float32(code)}
	if ctx.Err() != nil {
		v[0] = 1
	}
	if err := j.world.AllReduce(v, comm.Sum); err != nil {
		return 0, false, err
	}
	return int(v[1]), v[0] != 0, nil
}

// interruptCause is ctx, or on a rank that was not itself interrupted a
// context canceled because another was.
func (j *job) interruptCause(ctx context.Context) context.Context {
	if ctx.Err() != nil {
		return ctx
	}
	c, cancel := context.WithCancelCause(ctx)
	cancel(fmt.Errorf("%w: another rank of the world was interrupted", context.Canceled))
	return c
}

// serve runs the agreed command on this rank; every rank runs it.
func (j *job) serve(code int, paused *bool) error {
	switch code {
	case wcPause:
		j.pause(paused)
	case wcResume:
		j.unpause(paused)
	case wcCheckpoint:
		if err := j.checkpoint(); err != nil {
			j.logf(LevelError, "checkpoint failed: %v", err)
		}
	case wcStop, wcStopCheckpoint:
		if code == wcStopCheckpoint {
			if err := j.checkpoint(); err != nil {
				return fmt.Errorf("checkpoint before stopping: %w", err)
			}
		}
		return errStopped
	case wcQuit, wcQuitCheckpoint:
		return j.quit(code == wcQuitCheckpoint)
	}
	return nil
}
