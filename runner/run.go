package runner

import (
	"context"
	"fmt"
	"time"

	"resnetlab/data"
	"resnetlab/device"
	"resnetlab/spec"
)

// RunSpec runs every cell of spec, publishing events and obeying cmds. The
// runs train one after another, or at once when the spec sets concurrent =
// true and the devices allow it (see planGrid). Commands wrapped in To go
// to their run (see Command). It returns when every run has finished (with
// opts.StayOpen, when cmds is then closed or ctx is done); it does not
// close events (the caller does, after RunSpec returns). It writes each
// run's result with WriteResult. A run that fails does not stop the
// others. The error is non-nil when a run failed (including a missed
// target_acc, or Ctrl-C: then it matches context.Canceled) or the spec
// could not start.
func RunSpec(ctx context.Context, sp *spec.Spec, opts RunOptions, events chan<- Event, cmds <-chan Command) error {
	s, cells, rejected, moved, err := opts.apply(sp)
	if err != nil {
		return err
	}
	if err := checkWorld(s, cells, opts.World); err != nil {
		return err
	}
	g := &gridRun{spec: s, opts: opts, cells: cells, events: events}
	for _, r := range rejected {
		g.emit(Log{Level: LevelWarn, Text: r.String()})
	}
	g.plan = planGrid(s, cells)
	if g.plan.notice != "" {
		g.emit(Log{Time: time.Now(), Level: g.plan.level, Text: g.plan.notice})
	}
	if err := g.preflight(); err != nil {
		return g.failAll(err)
	}
	g.init()
	g.announceMoved(moved)
	return g.loop(ctx, cmds)
}

// PreflightError is a check that failed before any run trained (the
// device, the data set): every run of the grid ends with it, and it is one
// problem, to be reported once, not once per run.
type PreflightError struct{ Err error }

func (e *PreflightError) Error() string { return e.Err.Error() }
func (e *PreflightError) Unwrap() error { return e.Err }

// preflight checks, once for the grid, what every run needs: a backend of
// the spec's device (saying once why it is the CPU, when it is) and the
// data set, loaded for all the runs.
func (g *gridRun) preflight() error {
	s := g.spec
	p, err := device.PlanFor(s.Device, 1, true)
	if err != nil {
		return err
	}
	if p.Why != "" {
		g.emit(Log{Time: time.Now(), Level: LevelWarn, Text: p.Why})
	}
	if g.train, g.test, err = loadData(s); err != nil {
		return err
	}
	g.emit(Log{Time: time.Now(), Level: LevelInfo, Text: dataSourceLine(s.Dataset, g.train)})
	return nil
}

// failAll ends every run with the preflight error err: each front end
// shows it on every run, and no result file is touched.
func (g *gridRun) failAll(err error) error {
	pe := &PreflightError{Err: err}
	for _, c := range g.cells {
		g.emit(RunFinished{Run: c.ID, Err: pe})
	}
	return pe
}

// loadData reads the spec's data set.
// A data_dir the spec names is the only place searched.
func loadData(s *spec.Spec) (train, test *data.Dataset, err error) {
	opts := []data.Option{data.Channels(s.InChannels),
		data.SyntheticSize(s.Synthetic.Train, s.Synthetic.Test), data.Seed(uint64(s.Synthetic.Seed))}
	if s.DataDirNamed() {
		opts = append(opts, data.OnlyRoot())
	}
	return data.Load(s.Dataset, s.DataDir, opts...)
}

// dataSourceLine says where the data came from, so a run never trains on
// another copy than the user thinks without a word.
func dataSourceLine(name string, d *data.Dataset) string {
	src := d.Source
	if src == "" {
		src = "generated"
	}
	return fmt.Sprintf("data: %s from %s (%d training images)", name, src, d.N)
}

// QueuedInfo is what is known of cell c's run before its data is loaded
// (the front ends show it queued); the runner adds the steps per epoch.
func QueuedInfo(s *spec.Spec, c spec.Cell) RunInfo {
	return RunInfo{ID: c.ID, Spec: s.Name, Plugin: c.Plugin, Precision: c.Precision, WorldSize: c.WorldSize,
		Dataset: s.Dataset, Epochs: s.Epochs, CheckpointDir: c.CheckpointDir}
}

func runInfo(s *spec.Spec, c spec.Cell, train *data.Dataset) RunInfo {
	info := QueuedInfo(s, c)
	info.StepsPerEpoch = train.N / c.WorldSize / s.BatchSize
	return info
}
