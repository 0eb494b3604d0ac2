package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"resnetlab/ckpt"
	"resnetlab/comm"
	"resnetlab/data"
	"resnetlab/device"
	"resnetlab/engine"
	"resnetlab/kernels"
	"resnetlab/model"
	"resnetlab/report"
	"resnetlab/spec"
)

// job trains one cell of a spec's grid: a driver goroutine (this one) and
// one goroutine per rank. The driver hands every rank the same step,
// publishes events, and serves commands between steps.
type job struct {
	spec        *spec.Spec
	cell        spec.Cell
	info        RunInfo
	events      chan<- Event
	cmds        <-chan Command
	train, test *data.Dataset
	plan        device.Plan
	precision   kernels.DType
	sched       model.MultiStepLR
	ranks       []*rankState
	pool        *rankPool
	group       *comm.Group
	commKind    string           // commHost, commStaged, commDevice or commNCCL (comm.go)
	nccl        []*comm.NCCLComm // per rank, with commNCCL
	failed      bool             // the run ended in an error (close aborts NCCL)
	world       *comm.ProcComm   // a world of processes: this process trains one rank (dist.go)

	epoch, step int // position: 0-based epoch index, steps done in it
	epochLoss   float64
	epochSteps  int
	epochTime   time.Duration
	result      *report.Result
	trainImages int
	memAt       time.Time    // last MemoryUsage event
	startFrom   ckpt.Ref     // resume from this checkpoint before training (zero: fresh)
	place       placement    // its share of the machine while runs train at once
	est         estimator    // says how long the run will take, after its first steps
	trained     int          // steps this job has trained (a checkpoint needs one)
	reopened    bool         // asked for by ResumeFrom on a finished run
	gem         []geminiRank // per rank, Gemini statistics (memstats.go)
	reportSeq   uint64       // this rank's reports to rank 0 so far (rankreport.go)
	remote      remoteRanks  // rank 0: the other processes' reports
}

// rankState is what one rank owns.
type rankState struct {
	be     kernels.Backend
	comm   comm.DeviceCommunicator
	eng    engine.Trainer
	loader *data.Loader
	xh, yh []float32
	x, y   *kernels.Tensor
	in     inputBuf
	stats  engine.StepStats
	// dev and devTest hold the data sets in the backend's memory when it
	// builds the batches (nil: built on the host, uploaded through in).
	dev, devTest *deviceSet
	devErr       error // why dev is nil, when device batches were wanted
	// peakDev and peakHost are the run's peaks so far, of the backend and
	// of the host bytes outside it, as publishMemory sends them.
	peakDev, peakHost int64
}

func (j *job) emit(e Event) {
	if j.events != nil {
		j.events <- e
	}
}

func (j *job) logf(level Level, format string, args ...any) {
	j.emit(Log{Run: j.info.ID, Time: time.Now(), Level: level, Text: fmt.Sprintf(format, args...)})
}

// runCell trains one cell (from the checkpoint j.startFrom unless it is
// zero) and writes its result. A panic of the run's driver fails this run
// only.
func runCell(ctx context.Context, j *job) error {
	s, c := j.spec, j.cell
	j.result = &report.Result{Run: c.ID, Spec: s.Name, Plugin: c.Plugin, Precision: c.Precision,
		WorldSize: c.WorldSize, Dataset: s.Dataset, CheckpointDir: c.CheckpointDir, Width: s.Width, BatchSize: s.BatchSize, Epochs: s.Epochs,
		PeakDeviceBytes: make([]int64, c.WorldSize), PeakHostBytes: make([]int64, c.WorldSize)}
	err := safely(func() error { return j.run(ctx) })
	ferr := j.finish(err)
	kept := ""
	if j.recordable(err) && j.records() {
		if path := report.ResultPath(s.ResultsDir, j.result); j.keepsResult(path) {
			kept = fmt.Sprintf("nothing left to train from %s: %s left as it was", j.startFrom.Describe(), path)
			j.logf(LevelInfo, "%s", kept)
		} else if done := j.completeResultKept(path); done != nil {
			kept = fmt.Sprintf("%s left as it was: it records a complete training (%s, final %.2f%%), and this run ended %s "+
				"after %d of %d epochs (its checkpoints are in %s)", path, done.Status, 100*done.FinalTestAcc, j.result.Status,
				len(j.result.EpochResults), s.Epochs, c.CheckpointDir)
			j.logf(LevelWarn, "%s", kept)
		} else if werr := report.WriteResult(s.ResultsDir, j.result); werr != nil {
			ferr = errors.Join(ferr, werr)
			j.unrecorded(werr)
		}
	}
	j.emit(RunFinished{Run: c.ID, Result: j.result, Err: ferr, Kept: kept})
	return ferr
}

// unrecorded marks a run that trained to the end but whose result file
// could not be written as failed, so that the table and the exit status
// agree with the message (the result on disk is whatever was there).
func (j *job) unrecorded(werr error) {
	if j.result.Status == report.StatusDone {
		j.result.Status, j.result.Error = report.StatusFailed, werr.Error()
	}
}

// recordable reports whether the run's result may replace the result file
// of an earlier run of the cell: only a run that trained, finished, or was
// re-opened on purpose. A run that failed or was quit before its first step
// is reported (RunFinished, the exit code), not recorded over the past.
func (j *job) recordable(runErr error) bool {
	return j.trained > 0 || runErr == nil || j.reopened
}

// keepsResult reports whether the result file at path stays as it is: a
// run resumed from its last epoch trains nothing, and its result (train
// time and speed of no epoch) would replace the record of the run that
// trained those epochs.
func (j *job) keepsResult(path string) bool {
	if j.trained > 0 || j.reopened || j.startFrom.IsZero() {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
}

// completeResultKept is the result file at path when this run must not
// replace it: a run that trained part of the epochs never overwrites the
// record of another training (another checkpoint directory; for a file
// that names none, this run being fresh) that trained them all and ended
// done. A resume or re-opening of the same training may. Nil: write.
func (j *job) completeResultKept(path string) *report.Result {
	if len(j.result.EpochResults) >= j.spec.Epochs {
		return nil
	}
	rs, err := report.ReadResults([]string{path}) // none there, or unreadable: nothing to keep
	if err != nil || len(rs) != 1 || rs[0].Status != report.StatusDone {
		return nil
	}
	other := rs[0].CheckpointDir != j.cell.CheckpointDir
	if rs[0].CheckpointDir == "" {
		other = j.startFrom.IsZero() && !j.reopened
	}
	if !other {
		return nil
	}
	return rs[0]
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
	j.started(j.startFrom)
	err = j.loop(ctx)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, errStopped) { // agreed: every rank of a world ends here together
		j.syncReports()
	}
	if err != nil {
		return err
	}
	return j.digest()
}

// started tells the front ends that the run trains from ref (zero: from
// the start): RunStarted with the epochs it has behind it, then every
// rank's memory as it is now. It runs when the run begins and after every
// ResumeFrom, so both paths leave the same state behind: the Gemini
// statistics restart with the front ends' strip, which RunStarted clears.
// The first step publishes its memory too (its activations are the step's
// footprint).
func (j *job) started(ref ckpt.Ref) {
	j.restartChunks()
	j.emit(RunStarted{Info: j.info, StartEpoch: ref.Epoch, StartStep: ref.Step, History: slices.Clone(j.result.EpochResults)})
	j.publishMemory()
	j.memAt = time.Time{}
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

// finish fills the result's summary and applies target_acc.
func (j *job) finish(runErr error) error {
	r := j.result
	if r.TrainSeconds > 0 {
		r.ImagesPerSecond = float64(j.trainImages) / r.TrainSeconds
	}
	switch {
	case errors.Is(runErr, errStopped):
		r.Status = report.StatusStopped
		return nil
	case errors.Is(runErr, context.Canceled), errors.Is(runErr, context.DeadlineExceeded):
		// Ctrl-C: signal.NotifyContext's cause is a context.Canceled too.
		r.Status, r.Error = report.StatusInterrupted, runErr.Error()
		return runErr
	case runErr != nil:
		r.Status, r.Error = report.StatusFailed, runErr.Error()
		return runErr
	}
	r.Status = report.StatusDone
	if t := j.spec.TargetAcc; t > 0 && r.FinalTestAcc < t {
		err := fmt.Errorf("final test accuracy %.2f%% is below target_acc %.2f%% (%s)",
			100*r.FinalTestAcc, 100*t, j.spec.File)
		r.Status, r.Error = report.StatusFailed, err.Error()
		return err
	}
	return nil
}

// setup opens every rank's backend and builds its model and engine.
func (j *job) setup() error {
	n, local := j.cell.WorldSize, j.localRanks()
	j.group = comm.NewGroup(local)
	j.pool = startRanks(local, j.abortRanks)
	j.pool.first = j.globalRank(0)
	j.pool.explain = j.explainOOM // out of device memory: name the rank, its usage and the fix
	j.ranks = make([]*rankState, local)
	j.gem = make([]geminiRank, local)
	engCfg, err := j.engineConfig()
	if err != nil {
		return err
	}
	if j.commKind, err = j.planComm(); err != nil {
		return err
	}
	if err := j.startComm(); err != nil {
		return err
	}
	err = j.pool.do(func(i int) error {
		r := j.globalRank(i)
		be, err := j.plan.Open(j.deviceRank(i), j.planRanks())
		if err != nil {
			return err
		}
		if trainWrap != nil {
			be = trainWrap(be)
		}
		rs := &rankState{be: be}
		j.ranks[i] = rs
		if rs.comm, err = j.comm(i, be); err != nil {
			return err
		}
		m := model.NewResNet18(be, model.Config{Width: j.spec.Width, InChannels: j.train.C,
			NumClasses: len(j.train.Classes), DType: j.precision, Seed: uint64(j.spec.Seed)})
		if j.cell.Plugin == spec.PluginGemini {
			rs.eng, err = j.newGemini(r, be, rs.comm, m, engCfg.Scaler)
		} else {
			rs.eng, err = engine.NewEngine(be, rs.comm, m, j.withGraphs(engCfg, be))
		}
		if err != nil {
			return err
		}
		b := j.spec.BatchSize
		rs.loader = data.NewLoader(j.train, data.TrainOptions(b, uint64(j.spec.Seed), r, n))
		rs.yh = make([]float32, b)
		rs.x = be.New(kernels.CatData, j.precision, b, j.train.C, data.Side, data.Side)
		rs.y = be.New(kernels.CatData, kernels.F32, b)
		if j.deviceBatches() {
			rs.openDeviceSets(j.train, j.test)
		}
		if rs.dev == nil {
			rs.xh = make([]float32, b*j.train.ImageLen())
		}
		return nil
	})
	if err == nil {
		j.logInput()
		j.logGraphs()
	}
	return err
}

// deviceBatches says whether the spec wants batches built in the backend.
// Gemini under a device budget builds them on the host: the resident data
// set would take its share of the budget from the chunks.
func (j *job) deviceBatches() bool {
	return j.spec.DeviceBatches && !(j.cell.Plugin == spec.PluginGemini && j.spec.Gemini.DeviceBudget > 0)
}

// openDeviceSets uploads both data sets once; if either cannot be held,
// the rank builds every batch on the host.
func (rs *rankState) openDeviceSets(train, test *data.Dataset) {
	if rs.dev, rs.devErr = openDeviceSet(rs.be, train); rs.devErr != nil {
		return
	}
	if rs.devTest, rs.devErr = openDeviceSet(rs.be, test); rs.devErr != nil {
		rs.dev.free()
		rs.dev = nil
	}
}

// logInput says where rank 0 builds its batches and why.
func (j *job) logInput() {
	rs := j.ranks[0]
	switch {
	case rs.dev != nil:
		j.logf(LevelInfo, "batches built by the %s backend from the data sets it holds (%s per rank)",
			j.plan.Kind, spec.FormatSize(rs.dev.bytes()+rs.devTest.bytes()))
	case rs.devErr != nil:
		j.logf(LevelWarn, "batches built on the host: %v", rs.devErr)
	case j.spec.DeviceBatches:
		j.logf(LevelInfo, "batches built on the host: gemini's device_budget is not shared with the data set")
	default:
		j.logf(LevelInfo, "batches built on the host (device_batches = false)")
	}
}

func (j *job) engineConfig() (engine.EngineConfig, error) {
	c := engine.EngineConfig{Precision: j.precision, ZeroStage: j.spec.Zero.Stage}
	switch j.cell.Plugin {
	case spec.PluginTorchDDP:
		c.Plugin = engine.TorchDDP
	case spec.PluginLowLevelZero:
		c.Plugin = engine.LowLevelZero
	case spec.PluginGemini:
	default:
		return c, fmt.Errorf("unknown plugin %q", j.cell.Plugin)
	}
	c.Scaler = j.spec.LossScale(j.cell.Plugin)
	return c, nil
}

// close frees every rank's resources.
func (j *job) close() {
	if j.pool == nil {
		return
	}
	j.pool.do(func(r int) error {
		rs := j.ranks[r]
		if rs == nil {
			return nil
		}
		if rs.eng != nil {
			if r == 0 {
				j.geminiSummary(rs.eng)
				j.graphSummary(rs.eng)
			}
			rs.eng.Free()
			rs.eng.Model().Free()
		}
		rs.dev.free()
		rs.devTest.free()
		j.closeComm(r, rs)
		device.Close(rs.be)
		return nil
	})
	j.pool.close()
}
