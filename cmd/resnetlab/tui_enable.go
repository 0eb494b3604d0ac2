package main

import (
	"context"

	"resnetlab/ckpt"
	"resnetlab/comm"
	"resnetlab/runner"
	"resnetlab/spec"
	"resnetlab/tui"
)

// The terminal UI is built in. Deleting this file gives a headless-only
// build (run then falls back to headless output).
func init() { startTUI = runTUI }

func runTUI(ctx context.Context, sp *spec.Spec, cells []spec.Cell,
	events <-chan runner.Event, cmds chan<- runner.Command) error {
	return tui.Run(ctx, tuiOptions(sp, cells, events, cmds))
}

// relaunch is the command line that trains again once the runner has
// exited: resnetlab launch's own in a world it started (comm.LaunchVar),
// else "" (resnetlab run).
func relaunch() string {
	if env, ok, err := comm.EnvFromLaunch(); ok && err == nil {
		return env.Launch
	}
	return ""
}

// tuiOptions connects the UI to a run of spec. Send addresses every
// command to its run (runner.To), so it reaches that run only, even when
// several train at once, and a finished run can be re-opened (RunSpec
// stays open while the UI runs: see execute).
func tuiOptions(sp *spec.Spec, cells []spec.Cell, events <-chan runner.Event,
	cmds chan<- runner.Command) tui.Options {
	dirs := map[string]string{}
	infos := make([]runner.RunInfo, len(cells))
	for i, c := range cells {
		dirs[c.ID] = c.CheckpointDir
		infos[i] = runner.QueuedInfo(sp, c)
	}
	return tui.Options{
		Title:    sp.Name + " · " + sp.File,
		SpecFile: sp.File,
		Relaunch: relaunch(),
		Runs:     infos,
		Events:   events,
		Send: func(run string, c runner.Command) bool {
			if run != "" {
				c = runner.To{Run: run, Cmd: c}
			}
			select { // never block the UI; the buffer only fills once no run reads it
			case cmds <- c:
				return true
			default:
				return false
			}
		},
		Checkpoints: func(run string) []ckpt.Ref {
			refs, _ := ckpt.ListRefs(dirs[run])
			return refs
		},
	}
}
