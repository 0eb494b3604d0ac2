package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/runner"
)

// After an interrupt (Ctrl-C, SIGTERM, q in the UI) run says, for every
// run of the grid that did not finish, which checkpoint it has and the
// command line that goes on from there, as the user typed the spec: an
// interrupted run resumes from its last checkpoint (--resume E@S --run
// ID), and the runs that never started, or were interrupted before any
// checkpoint, train from the start (--run ID,...). --run is left out where
// the command trains every run of the spec anyway. In a world that
// resnetlab launch started, rank 0 says the same with the launch's command
// line (comm.LaunchVar); another launcher's world goes on with its own.

// invocation is how run was called: the spec path as typed and the flags
// a command line that goes on repeats (--headless, --device, --results).
// In a world that resnetlab launch started, the command line that goes on
// is the launch's (launch).
type invocation struct {
	spec     string
	flags    []string
	resume   ckpt.Ref // --resume as given: where the runs that did not start start
	userRuns bool     // --run was given: every command names its runs
	launch   string   // the launch's command line, quoted, less --resume and the spec (comm.Env.Launch); "" for run
	nodes    bool     // the launch spans nodes: each runs the command with its own --node-rank
}

// launched reports whether resnetlab launch started this world: rank 0
// then says how to go on, with the launch's command line.
func (inv invocation) launched() bool { return inv.launch != "" }

// newInvocation reads the flags the user set from fs (after parsing).
func newInvocation(fs *flag.FlagSet, spec string, opts runner.RunOptions) invocation {
	inv := invocation{spec: spec, resume: opts.Resume}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	if v, ok := set["headless"]; ok && v == "true" {
		inv.flags = append(inv.flags, "--headless")
	}
	for _, name := range []string{"device", "results"} {
		if v, ok := set[name]; ok {
			inv.flags = append(inv.flags, "--"+name, v)
		}
	}
	_, inv.userRuns = set["run"]
	if w := opts.World; w != nil && w.Launcher() != "" {
		inv.launch, inv.nodes = w.Launcher(), w.LocalWorldSize() < w.WorldSize()
	}
	return inv
}

// command is the run command line for runs (every run of the session's
// grid when all is set and the user named none) from checkpoint from
// (zero: from the start, or the spec's resume), quoted for a POSIX shell.
func (inv invocation) command(from ckpt.Ref, runs []string, all bool) string {
	if inv.launched() { // one run, of the launch's world: no --run
		args := []string{}
		if !from.IsZero() {
			args = append(args, "--resume", from.String())
		}
		if strings.HasPrefix(inv.spec, "-") {
			args = append(args, "--")
		}
		args = append(args, inv.spec)
		for i, a := range args {
			args[i] = shellQuote(a)
		}
		return inv.launch + " " + strings.Join(args, " ")
	}
	args := append([]string{"resnetlab", "run"}, inv.flags...)
	if !from.IsZero() {
		args = append(args, "--resume", from.String())
	}
	if !all || inv.userRuns {
		args = append(args, "--run", strings.Join(runs, ","))
	}
	if strings.HasPrefix(inv.spec, "-") {
		args = append(args, "--")
	}
	args = append(args, inv.spec)
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// shellQuote leaves a word of safe characters as it is and single-quotes
// any other.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@,+=%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// where is where the command runs, when it is not just here: a launch
// of several nodes goes on on every node.
func (inv invocation) where() string {
	if inv.nodes {
		return ", on every node (each with its own --node-rank)"
	}
	return ""
}

// saved is a checkpoint a run has: where, and of which position.
type saved struct {
	ref ckpt.Ref
	dir string
}

// progress follows, from the event stream, how far each run of the grid
// got in this session: how it finished (if it did) and its last
// checkpoint (saved, or resumed from).
type progress struct {
	order  []string // the grid's runs, in order
	status map[string]report.Status
	last   map[string]saved
	// reopened holds the finished runs re-opened (the UI's r) that have
	// not started again, and the checkpoint they were to start from.
	reopened map[string]saved
}

func newProgress(runs []string) *progress {
	return &progress{order: runs, status: map[string]report.Status{}, last: map[string]saved{},
		reopened: map[string]saved{}}
}

func (p *progress) note(ev runner.Event) {
	switch e := ev.(type) {
	case runner.RunQueued:
		if !e.From.IsZero() {
			p.reopened[e.Info.ID] = saved{e.From, e.Info.CheckpointDir}
		}
	case runner.RunStarted:
		delete(p.reopened, e.Info.ID)
		if from := e.From(); !from.IsZero() {
			p.last[e.Info.ID] = saved{from, e.Info.CheckpointDir}
		}
	case runner.CheckpointSaved:
		p.last[e.Run] = saved{e.Ref(), e.Dir}
	case runner.RunFinished:
		switch {
		case e.Result != nil && e.Result.Status != "":
			p.status[e.Run] = e.Result.Status
		case errors.Is(e.Err, context.Canceled):
			p.status[e.Run] = report.StatusInterrupted
		case e.Err != nil:
			p.status[e.Run] = report.StatusFailed
		default:
			p.status[e.Run] = report.StatusDone
		}
	}
}

// howToContinue is what to run next for every run that did not finish:
// a paragraph saying what it has (wrapped to width), then the command,
// indented, on a line of its own (never wrapped: it is to be copied whole). "" when every run
// finished (done or failed).
func (p *progress) howToContinue(inv invocation, width int) string {
	var b strings.Builder
	var notStarted, noCkpt []string
	for _, id := range p.order {
		st, finished := p.status[id]
		if !finished {
			notStarted = append(notStarted, id)
			continue
		}
		if r, ok := p.reopened[id]; ok {
			fmt.Fprintf(&b, "%s\n    %s\n", wrapText(fmt.Sprintf("%s was re-opened from the checkpoint of %s in %s but had not "+
				"started again, so its result is as before. To train it from there%s:",
				id, r.ref.Describe(), r.dir, inv.where()), width, ""), inv.command(r.ref, []string{id}, len(p.order) == 1))
			continue
		}
		if st != report.StatusInterrupted && st != report.StatusStopped {
			continue
		}
		last, ok := p.last[id]
		if !ok {
			noCkpt = append(noCkpt, id)
			continue
		}
		fmt.Fprintf(&b, "%s\n    %s\n", wrapText(fmt.Sprintf("%s was %s; its last checkpoint, of %s, is in %s. To continue it%s:",
			id, st, last.ref.Describe(), last.dir, inv.where()), width, ""), inv.command(last.ref, []string{id}, len(p.order) == 1))
	}
	if fresh := append(noCkpt, notStarted...); len(fresh) > 0 {
		var parts []string
		if len(noCkpt) > 0 {
			parts = append(parts, strings.Join(noCkpt, ", ")+" (interrupted before any checkpoint, so from the start)")
		}
		if len(notStarted) > 0 {
			parts = append(parts, strings.Join(notStarted, ", ")+" (not started)")
		}
		// They start where this session's runs started: --resume as given
		// (a run that started from it has a checkpoint), else fresh or the
		// spec's resume key.
		fmt.Fprintf(&b, "%s\n    %s\n", wrapText("To train "+strings.Join(parts, " and ")+inv.where()+":", width, ""),
			inv.command(inv.resume, fresh, len(fresh) == len(p.order)))
	}
	return b.String()
}
