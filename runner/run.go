package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/spec"
	"time"

	"resnetlab/data"
	"resnetlab/device"
	"resnetlab/engine"
	"resnetlab/kernels"
	"resnetlab/model"
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
	s, cells, rejected, err := opts.Apply(sp)
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

func runInfo(s *spec.Spec, c spec.Cell, train *data.Dataset) RunInfo {
	return RunInfo{ID: c.ID, Spec: s.Name, Plugin: c.Plugin, Precision: c.Precision, WorldSize: c.WorldSize,
		Dataset: s.Dataset, Epochs: s.Epochs, CheckpointDir: c.CheckpointDir,
		StepsPerEpoch: train.N / c.WorldSize / s.BatchSize}
}

// runCell trains one cell (from the checkpoint j.startFrom unless it is
// zero) and writes its result. A panic of the run's driver fails this run
// only.
func runCell(ctx context.Context, j *job) error {
	s, c := j.spec, j.cell
	j.result = &report.Result{Run: c.ID, Spec: s.Name, Plugin: c.Plugin, Precision: c.Precision,
		WorldSize: c.WorldSize, Dataset: s.Dataset, Width: s.Width, BatchSize: s.BatchSize, Epochs: s.Epochs,
		PeakDeviceBytes: make([]int64, c.WorldSize), PeakHostBytes: make([]int64, c.WorldSize)}
	err := safely(func() error { return j.run(ctx) })
	ferr := j.finish(err)
	if j.recordable(err) && j.records() {
		if werr := report.WriteResult(s.ResultsDir, j.result); werr != nil {
			ferr = errors.Join(ferr, werr)
		}
	}
	j.emit(RunFinished{Run: c.ID, Result: j.result, Err: ferr})
	return ferr
}

// recordable reports whether the run's result may replace the result file
// of an earlier run of the cell: only a run that trained, finished, or was
// re-opened on purpose. A run that failed or was quit before its first step
// is reported (RunFinished, the exit code), not recorded over the past.
func (j *job) recordable(runErr error) bool {
	return j.trained > 0 || runErr == nil || j.reopened
}

// run sets the job up and trains it.
func (j *job) run(ctx context.Context) (err error) {
	if j.precision, err = kernels.ParseDType(j.cell.Precision); err != nil {
		return err
	}
	if j.info.StepsPerEpoch < 1 {
		return fmt.Errorf("%s: %d training images cannot fill one batch of %d on each of %d ranks",
			j.spec.File, j.train.N, j.spec.BatchSize, j.cell.WorldSize)
	}
	if j.plan, err = device.PlanFor(j.spec.Device, j.planRanks(), j.spec.ShareDevices); err != nil {
		return err
	}
	j.plan.Place(j.place.share(), j.planRanks())
	if n := j.plan.RunNotice(); n != "" {
		j.logf(LevelWarn, "%s", n)
	}
	j.sched = model.MultiStepLR{Base: j.spec.ScaledLR(j.cell.WorldSize), Milestones: j.spec.Milestones, Gamma: j.spec.Gamma}
	defer func() {
		j.failed = err != nil
		j.close()
	}()
	if err := j.setup(); err != nil {
		return err
	}
	j.info.Backend = j.plan.Kind
	for _, rs := range j.ranks {
		j.info.Devices = append(j.info.Devices, rs.be.Device())
	}
	j.result.Backend, j.result.Devices = j.info.Backend, j.info.Devices
	if !noCheckpoints(j.cell.CheckpointDir) && j.records() { // held until the run ends: no other run's saves interleave
		lock, err := ckpt.LockDir(j.cell.CheckpointDir, j.info.ID)
		if err != nil {
			return err
		}
		defer lock.Release()
	}
	if !j.startFrom.IsZero() {
		if err := j.resume(j.startFrom); err != nil {
			return err
		}
	}
	j.emit(RunStarted{Info: j.info, StartEpoch: j.startFrom.Epoch, StartStep: j.startFrom.Step})
	if err := j.loop(ctx); err != nil {
		return err
	}
	return j.digest()
}

// digest records the SHA-256 of the final model file (written now into a
// scratch directory when the run keeps no checkpoint of its last epoch).
func (j *job) digest() error {
	meta := j.meta(j.spec.Epochs, j.info.StepsPerEpoch)
	var st *engine.State
	if j.world != nil { // every process takes part in the gather; rank 0 digests
		var err error
		if st, err = j.gatherState(); err != nil || !j.records() {
			return err
		}
	}
	if !noCheckpoints(j.cell.CheckpointDir) && j.spec.Interval > 0 { // endEpoch saved the last epoch
		path, _, _ := ckpt.Paths(j.cell.CheckpointDir, j.spec.Epochs)
		if _, err := os.Stat(path); err == nil {
			sum, err := ckpt.FileSHA256(path)
			j.result.ModelSHA256 = sum
			return err
		}
	}
	if st == nil {
		var err error
		if st, err = j.gatherState(); err != nil {
			return err
		}
	}
	var err error
	j.result.ModelSHA256, err = ckpt.ModelDigest(st, meta)
	return err
}
