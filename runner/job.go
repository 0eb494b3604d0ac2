package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/spec"
	"time"

	"resnetlab/comm"
	"resnetlab/data"
	"resnetlab/device"
	"resnetlab/engine"
	"resnetlab/kernels"
	"resnetlab/model"
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
}

// errStopped ends a run that a Stop command or Ctrl-C interrupted.
var errStopped = errors.New("stopped")

func (j *job) emit(e Event) {
	if j.events != nil {
		j.events <- e
	}
}

func (j *job) logf(level Level, format string, args ...any) {
	j.emit(Log{Run: j.info.ID, Time: time.Now(), Level: level, Text: fmt.Sprintf(format, args...)})
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

// trainStep runs step j.step of epoch j.epoch on every rank.
func (j *job) trainStep(lr float32) error {
	epoch, step := j.epoch, j.step
	return j.pool.do(func(r int) error {
		rs := j.ranks[r]
		if rs.dev != nil {
			rs.dev.batch(rs.loader, epoch, step, rs.x, rs.yh)
		} else {
			rs.loader.Batch(epoch, step, rs.xh, rs.yh)
			rs.in.upload(rs.be, rs.x, rs.xh)
		}
		rs.be.Upload(rs.y, rs.yh)
		st, err := rs.eng.Step(rs.x, rs.y, lr)
		rs.stats = st
		if errors.Is(err, engine.ErrCapture) {
			return fmt.Errorf("%w (cuda_graphs = true in %s: set it to false to train eagerly)", err, j.spec.File)
		}
		if err != nil {
			return err
		}
		if j.precision == kernels.F32 && !finite(st.Loss) {
			return fmt.Errorf("loss is %v at epoch %d step %d (fp32 has no loss scaler to skip it): %s",
				st.Loss, epoch+1, step+1, firstNonFinite(rs.eng.Model()))
		}
		return nil
	})
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// firstNonFinite names the first layer (in forward order) whose weights
// or gradients hold inf or NaN.
func firstNonFinite(m *model.ResNet) string {
	be := m.Backend()
	for _, p := range m.Params() {
		if p.W == nil { // a Gemini chunk that is not on the device
			continue
		}
		if be.NonFinite([]*kernels.Tensor{p.W}) {
			return "first non-finite weights: " + p.Name
		}
		if p.G != nil && be.NonFinite([]*kernels.Tensor{p.G}) {
			return "first non-finite gradient: " + p.Name
		}
	}
	return "weights and gradients are finite: the input or the loss overflowed"
}

// meta describes a checkpoint taken now.
func (j *job) meta(epoch, step int) ckpt.Meta {
	return ckpt.Meta{Epoch: epoch, Step: step, StepsPerEpoch: j.info.StepsPerEpoch,
		Plugin: j.cell.Plugin, Precision: j.cell.Precision, World: j.cell.WorldSize,
		Width: j.spec.Width, InChannels: j.train.C, Classes: len(j.train.Classes), Dataset: j.spec.Dataset,
		SynTest: j.spec.Synthetic.Test, SynSeed: int(j.spec.Synthetic.Seed),
		History: trimEpochs(j.result.EpochResults, epoch), Partial: j.partial(step)}
}

// partial is the running sums of the epoch in progress when a checkpoint
// is taken at step (of StepsPerEpoch), or nil at an epoch end.
func (j *job) partial(step int) *ckpt.PartialEpoch {
	if step >= j.info.StepsPerEpoch || j.epochSteps == 0 {
		return nil
	}
	return &ckpt.PartialEpoch{LossSum: j.epochLoss, Steps: j.epochSteps, Seconds: j.epochTime.Seconds()}
}

// gatherState collects the full training state (a collective).
func (j *job) gatherState() (*engine.State, error) {
	states := make([]*engine.State, len(j.ranks))
	err := j.pool.do(func(r int) error {
		st, err := j.ranks[r].eng.State()
		states[r] = st
		return err
	})
	return states[0], err
}

// checkpoint saves the current position: an epoch end (step == steps per
// epoch) or mid-epoch, named after the epoch in progress.
func (j *job) checkpoint() error {
	if noCheckpoints(j.cell.CheckpointDir) {
		j.logf(LevelWarn, "no checkpoint directory configured: nothing saved")
		return nil
	}
	if j.trained == 0 {
		// Nothing changed since the start (or the resumed checkpoint): a
		// save would be a step-0 model under an epoch's name.
		j.logf(LevelInfo, "no checkpoint saved: nothing trained since the run started")
		return nil
	}
	st, err := j.gatherState()
	if err != nil || !j.records() {
		return err
	}
	epoch, step := j.epoch+1, j.step
	if j.step == 0 && j.epoch > 0 { // at an epoch boundary: the finished epoch
		epoch, step = j.epoch, j.info.StepsPerEpoch
	}
	meta := j.meta(epoch, step)
	files, err := ckpt.Save(j.cell.CheckpointDir, st, meta, j.sched)
	if err != nil {
		return err
	}
	ref := meta.Ref()
	j.emit(CheckpointSaved{Run: j.info.ID, Epoch: ref.Epoch, Step: ref.Step, Dir: j.cell.CheckpointDir, Files: files})
	return nil
}

// resume loads checkpoint ref into every rank and moves the position.
func (j *job) resume(ref ckpt.Ref) error {
	lc, err := ckpt.Load(j.cell.CheckpointDir, ref)
	if err != nil {
		return err
	}
	if err := j.checkResume(ref, lc); err != nil {
		return err
	}
	if lc.StepsPerEpoch != j.info.StepsPerEpoch {
		j.logf(LevelWarn, "checkpoint %s was taken with %d steps per epoch, this run has %d", ref, lc.StepsPerEpoch, j.info.StepsPerEpoch)
	}
	if err := j.pool.do(func(r int) error { return j.ranks[r].eng.LoadState(lc.State) }); err != nil {
		return fmt.Errorf("resume from %s %s: %w", j.cell.CheckpointDir, ref.Describe(), err)
	}
	j.epoch, j.step = lc.Epoch, 0
	j.epochLoss, j.epochSteps, j.epochTime = 0, 0, 0
	if lc.Step < lc.StepsPerEpoch { // taken mid-epoch: continue that epoch
		j.epoch, j.step = lc.Epoch-1, lc.Step
		if p := lc.Partial; p != nil {
			j.epochLoss, j.epochSteps = p.LossSum, p.Steps
			j.epochTime = time.Duration(p.Seconds * float64(time.Second))
		}
	}
	j.result.EpochResults = trimEpochs(j.result.EpochResults, j.epoch)
	// A new process knows nothing of the epochs before the checkpoint: take
	// them from it, so results and the TUI show the whole curve.
	if h := trimEpochs(lc.History, j.epoch); len(h) > len(j.result.EpochResults) {
		j.result.EpochResults = h
	}
	j.accuracyFromHistory()
	j.logf(LevelInfo, "resumed from %s %s (continuing at epoch %d step %d)", j.cell.CheckpointDir, ref.Describe(), j.epoch+1, j.step+1)
	return nil
}

// accuracyFromHistory sets the final and best accuracy from the epochs the
// run has (after a resume, some come from the checkpoint), so that the best
// epoch before the checkpoint still counts; later evaluations update them.
func (j *job) accuracyFromHistory() {
	r := j.result
	r.FinalTestAcc, r.BestTestAcc = 0, 0
	for _, e := range r.EpochResults {
		if finite(float32(e.TestAcc)) {
			r.FinalTestAcc, r.BestTestAcc = e.TestAcc, max(r.BestTestAcc, e.TestAcc)
		}
	}
}

func trimEpochs(es []report.EpochResult, upTo int) []report.EpochResult {
	for i, e := range es {
		if e.Epoch > upTo {
			return es[:i]
		}
	}
	return es
}

// control serves the commands that arrived, blocking while paused.
func (j *job) control(ctx context.Context) error {
	if err := j.worldInterrupted(ctx); err != nil {
		return err
	}
	paused := false
	for {
		var cmd Command
		if paused {
			select {
			case cmd = <-j.cmds:
			case <-ctx.Done():
				return j.interrupted(ctx)
			}
		} else {
			select {
			case cmd = <-j.cmds:
			case <-ctx.Done():
				return j.interrupted(ctx)
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
			j.emit(RunStarted{Info: j.info, StartEpoch: c.Epoch, StartStep: c.Step})
		}
	}
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
