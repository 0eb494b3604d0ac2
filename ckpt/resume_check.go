package runner

import (
	"fmt"
	"strings"

	"resnetlab/data"
	"resnetlab/model"
)

// checkResume refuses a checkpoint that cannot continue this run, before
// any rank loads it: files from two different saves (checkSameSnapshot),
// parameters whose shapes differ from the run's model (checkModelFits, one
// line instead of one per key) and a model saved for other settings or
// another data set (checkSameModel).
func (j *job) checkResume(ref CheckpointRef, lc *loadedCheckpoint) error {
	dir := j.cell.CheckpointDir
	if err := checkSameSnapshot(dir, ref); err != nil {
		return err
	}
	run := j.meta(ref.Epoch, 0)
	if m := j.ranks[0].eng.Model(); allParamsPresent(m) {
		if err := checkModelFits(dir, ref, lc.state.Model, m, run); err != nil {
			return err
		}
	}
	return checkSameModel(dir, ref, run)
}

// allParamsPresent reports whether every parameter of m has its tensor: a
// Gemini engine keeps chunks it evicted to host memory without one, and
// checkModelFits reads the shapes from those tensors.
func allParamsPresent(m *model.ResNet) bool {
	for _, p := range m.Params() {
		if p.W == nil {
			return false
		}
	}
	return true
}

// checkSameModel compares the model settings recorded in epoch's
// model_E.pth with the run's: width, in_channels, num_classes and the data
// set. Keys the file lacks are not compared (a checkpoint imported from
// another program). The error names the file, every key that differs with
// both values, and the spec settings that would match the checkpoint.
func checkSameModel(dir string, ref CheckpointRef, run ckptMeta) error {
	path, _, _ := ref.Paths(dir)
	_, meta, err := ReadCheckpointMeta(path)
	if err != nil {
		return err
	}
	var diffs, fixes []string
	for _, k := range []struct {
		key, spec string
		want      int
	}{
		{"width", "width", run.Width},
		{"in_channels", "in_channels", run.InChannels},
		{"num_classes", "", run.Classes},
	} {
		got, err := MetaInt(meta, k.key)
		if err != nil || got == k.want {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s is %d in the checkpoint and %d in this run", k.key, got, k.want))
		if k.spec != "" {
			fixes = append(fixes, fmt.Sprintf("%s = %d", k.spec, got))
		}
	}
	if got, err := MetaString(meta, "dataset"); err == nil && got != "" && canonicalData(got) != canonicalData(run.Dataset) {
		diffs = append(diffs, fmt.Sprintf("dataset is %q in the checkpoint and %q in this run", got, run.Dataset))
		fixes = append(fixes, fmt.Sprintf("dataset = %q", got))
	}
	if len(diffs) == 0 {
		return nil
	}
	fix := "resume = 0 to start afresh"
	if len(fixes) > 0 {
		fix = strings.Join(fixes, " and ") + " in the spec, or " + fix
	}
	return fmt.Errorf("resume from %s %s: checkpoint %s was saved for another model: %s (want %s)",
		dir, ref.Describe(), path, strings.Join(diffs, "; "), fix)
}

// canonicalData is a data set's canonical name, or the name itself when it
// is not one resnetlab knows.
func canonicalData(name string) string {
	if c, err := data.Canonical(name); err == nil {
		return c
	}
	return name
}
