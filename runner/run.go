package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"resnetlab/data"
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
func RunSpec(ctx context.Context, spec *Spec, opts RunOptions, events chan<- Event, cmds <-chan Command) error {
	s, cells, rejected, err := opts.Apply(spec)
	if err != nil {
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
	if g.train, g.test, err = loadData(s); err != nil {
		return err
	}
	g.emit(Log{Time: time.Now(), Level: LevelInfo, Text: dataSourceLine(s.Dataset, g.train)})
	g.init()
	return g.loop(ctx, cmds)
}

// loadData reads the spec's data set.
// A data_dir the spec names is the only place searched.
func loadData(s *Spec) (train, test *data.Dataset, err error) {
	opts := []data.Option{data.Channels(s.InChannels),
		data.SyntheticSize(s.Synthetic.Train, s.Synthetic.Test), data.Seed(uint64(s.Synthetic.Seed))}
	if s.dataDirSet {
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

func runInfo(s *Spec, c Cell, train *data.Dataset) RunInfo {
	return RunInfo{ID: c.ID, Spec: s.Name, Plugin: c.Plugin, Precision: c.Precision, WorldSize: c.WorldSize,
		Dataset: s.Dataset, Epochs: s.Epochs, CheckpointDir: c.CheckpointDir,
		StepsPerEpoch: train.N / c.WorldSize / s.BatchSize}
}

// runCell trains one cell (from the checkpoint of epoch resume when > 0)
// and writes its result. A panic of the run's driver fails this run only.
func runCell(ctx context.Context, s *Spec, c Cell, info RunInfo, train, test *data.Dataset,
	events chan<- Event, cmds <-chan Command, resume int, pl placement) error {
	j := &job{spec: s, cell: c, info: info, events: events, cmds: cmds, train: train, test: test,
		startEpoch: resume, place: pl}
	j.result = &Result{Run: c.ID, Spec: s.Name, Plugin: c.Plugin, Precision: c.Precision,
		WorldSize: c.WorldSize, Dataset: s.Dataset, Width: s.Width, BatchSize: s.BatchSize, Epochs: s.Epochs,
		PeakDeviceBytes: make([]int64, c.WorldSize), PeakHostBytes: make([]int64, c.WorldSize)}
	err := safely(func() error { return j.run(ctx) })
	ferr := j.finish(err)
	if werr := WriteResult(s.ResultsDir, j.result); werr != nil {
		ferr = errors.Join(ferr, werr)
	}
	j.emit(RunFinished{Run: c.ID, Result: j.result, Err: ferr})
	return ferr
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
	if j.plan, err = planBackends(j.spec.Device, j.cell.WorldSize, j.spec.ShareDevices); err != nil {
		return err
	}
	j.plan.place(j.place, j.cell.WorldSize)
	if j.plan.notice != "" {
		j.logf(LevelWarn, "%s", j.plan.notice)
	}
	j.sched = model.MultiStepLR{Base: j.spec.ScaledLR(j.cell.WorldSize), Milestones: j.spec.Milestones, Gamma: j.spec.Gamma}
	defer func() {
		j.failed = err != nil
		j.close()
	}()
	if err := j.setup(); err != nil {
		return err
	}
	j.info.Backend = j.plan.kind
	for _, rs := range j.ranks {
		j.info.Devices = append(j.info.Devices, rs.be.Device())
	}
	j.result.Backend, j.result.Devices = j.info.Backend, j.info.Devices
	if !noCheckpoints(j.cell.CheckpointDir) { // held until the run ends: no other run's saves interleave
		lock, err := lockCheckpointDir(j.cell.CheckpointDir, j.info.ID)
		if err != nil {
			return err
		}
		defer lock.release()
	}
	if j.startEpoch > 0 {
		if err := j.resume(j.startEpoch); err != nil {
			return err
		}
	}
	j.emit(RunStarted{Info: j.info, StartEpoch: j.startEpoch})
	if err := j.loop(ctx); err != nil {
		return err
	}
	return j.digest()
}

// digest records the SHA-256 of the final model file (written now into a
// scratch directory when the run keeps no checkpoint of its last epoch).
func (j *job) digest() error {
	meta := j.meta(j.spec.Epochs, j.info.StepsPerEpoch)
	if !noCheckpoints(j.cell.CheckpointDir) && j.spec.Interval > 0 { // endEpoch saved the last epoch
		path, _, _ := CheckpointPaths(j.cell.CheckpointDir, j.spec.Epochs)
		if _, err := os.Stat(path); err == nil {
			sum, err := fileSHA256(path)
			j.result.ModelSHA256 = sum
			return err
		}
	}
	st, err := j.gatherState()
	if err != nil {
		return err
	}
	j.result.ModelSHA256, err = modelDigest(st, meta)
	return err
}
