package runner

import (
	"strings"

	"resnetlab/ckpt"
	"resnetlab/model"
)

// The run's side of checkpoints: whether it keeps any, the checks before a
// resume that need the run's model, and the checkpoint an event names. The
// container, its reads and the checks on files alone are package ckpt.

// noCheckpoints reports whether a run keeps no checkpoint directory.
func noCheckpoints(dir string) bool { return strings.TrimSpace(dir) == "" }

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
