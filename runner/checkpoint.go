package runner

import (
	"fmt"
	"strings"
	"time"

	"resnetlab/ckpt"
	"resnetlab/engine"
	"resnetlab/model"
	"resnetlab/report"
)

// The run's side of checkpoints: whether it keeps any, what a save holds
// and taking one (job.checkpoint), loading one into every rank
// (job.resume) after the checks that need the run's model (checkResume),
// and the checkpoint an event names. The container, its reads and the
// checks on files alone are package ckpt.

// noCheckpoints reports whether a run keeps no checkpoint directory.
func noCheckpoints(dir string) bool { return strings.TrimSpace(dir) == "" }

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
	next := fmt.Sprintf("continuing at epoch %d step %d", j.epoch+1, j.step+1)
	if j.epoch >= j.spec.Epochs { // the checkpoint ends the run: there is no such epoch
		next = fmt.Sprintf("it holds all %d epochs", j.spec.Epochs)
	}
	j.logf(LevelInfo, "resumed from %s %s (%s)", j.cell.CheckpointDir, ref.Describe(), next)
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

// checkResume refuses a checkpoint that cannot continue this run, before
// any rank loads it: files from two different saves (ckpt.CheckSameSnapshot),
// parameters whose shapes differ from the run's model (ckpt.CheckModelFits, one
// line instead of one per key) and a model saved for other settings or
// another data set (ckpt.CheckSameModel).
func (j *job) checkResume(ref ckpt.Ref, lc *ckpt.Loaded) error {
	dir := j.cell.CheckpointDir
	if err := ckpt.CheckSameSnapshot(dir, ref); err != nil {
		return err
	}
	run := j.meta(ref.Epoch, 0)
	if m := j.ranks[0].eng.Model(); allParamsPresent(m) {
		if err := ckpt.CheckModelFits(dir, ref, lc.State.Model, m, run); err != nil {
			return err
		}
	}
	return ckpt.CheckSameModel(dir, ref, run)
}

// allParamsPresent reports whether every parameter of m has its tensor: a
// Gemini engine keeps chunks it evicted to host memory without one, and
// ckpt.CheckModelFits reads the shapes from those tensors.
func allParamsPresent(m *model.ResNet) bool {
	for _, p := range m.Params() {
		if p.W == nil {
			return false
		}
	}
	return true
}

// From is the checkpoint the run started from (zero: a fresh start).
func (e RunStarted) From() ckpt.Ref {
	return ckpt.Ref{Epoch: e.StartEpoch, Step: e.StartStep}
}

// Ref is the checkpoint a CheckpointSaved names.
func (e CheckpointSaved) Ref() ckpt.Ref { return ckpt.Ref{Epoch: e.Epoch, Step: e.Step} }
