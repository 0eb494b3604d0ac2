package ckpt

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"resnetlab/data"
	"resnetlab/model"
)

// CheckModelFits reports in one line why the model state sd, read from the
// checkpoint of epoch in dir, cannot load into m: the first parameter
// whose shape differs with both shapes, how many others differ, and the
// settings (width, in_channels, classes) the checkpoint was saved with next
// to the run's. It returns nil when every parameter of m has its shape in
// sd; the full load then checks buffers, counters and missing keys.
// Without it a width-4 checkpoint resumed into a width-8 spec prints one
// line per mismatched key (over a hundred).
func CheckModelFits(dir string, ref Ref, sd []model.NamedTensor, m *model.ResNet, run Meta) error {
	have := make(map[string][]int, len(sd))
	for _, nt := range sd {
		have[nt.Name] = nt.Shape
	}
	first, differ := "", 0
	for _, p := range m.Params() {
		got, ok := have[p.Name]
		switch {
		case !ok:
			if first == "" {
				first = fmt.Sprintf("key %q (shape %v in the model) is missing from the checkpoint", p.Name, p.W.Shape)
			}
			differ++
		case !slices.Equal(got, p.W.Shape):
			if first == "" {
				first = fmt.Sprintf("key %q has shape %v in the checkpoint and %v in the model", p.Name, got, p.W.Shape)
			}
			differ++
		}
	}
	if differ == 0 {
		return nil
	}
	path, _, _ := ref.Paths(dir)
	msg := fmt.Sprintf("checkpoint %s does not fit this run's model: %s", path, first)
	if differ > 1 {
		msg += fmt.Sprintf(" (%d more parameters differ)", differ-1)
	}
	return fmt.Errorf("%s%s", msg, settingsDiff(path, run))
}

// settingsDiff names the model settings that differ between the checkpoint
// file's metadata and the run, with the spec key that fixes each.
func settingsDiff(path string, run Meta) string {
	_, meta, err := ReadMeta(path)
	if err != nil {
		return ""
	}
	var diffs, fixes []string
	for _, d := range modelDiffs(meta, run) {
		diffs = append(diffs, fmt.Sprintf("%s %d, this run has %d", d.key, d.got, d.want))
		if d.spec != "" {
			fixes = append(fixes, fmt.Sprintf("%s = %d", d.spec, d.got))
		} else {
			fixes = append(fixes, fmt.Sprintf("a data set with %d classes", d.got))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("; the checkpoint was saved with %s (want %s in the spec, or resume = 0 to start afresh)",
		strings.Join(diffs, "; "), strings.Join(fixes, " and "))
}

// modelDiff is a model setting recorded in a checkpoint file's metadata
// with another value than the run's.
type modelDiff struct {
	key       string // the metadata key
	spec      string // the spec key that sets it ("" for num_classes: the data set does)
	got, want int    // the checkpoint's value and the run's
}

// modelDiffs lists width, in_channels and num_classes, in that order,
// where meta records a value other than run's. Keys meta lacks are not
// compared (a checkpoint imported from another program).
func modelDiffs(meta map[string]any, run Meta) []modelDiff {
	var out []modelDiff
	for _, k := range []modelDiff{
		{key: "width", spec: "width", want: run.Width},
		{key: "in_channels", spec: "in_channels", want: run.InChannels},
		{key: "num_classes", want: run.Classes},
	} {
		got, err := MetaInt(meta, k.key)
		if err != nil || got == k.want {
			continue
		}
		k.got = got
		out = append(out, k)
	}
	return out
}

// CheckSameSnapshot makes sure the three files of epoch's checkpoint in dir
// were written by one save. Two runs writing one directory, or a crash
// while a checkpoint is overwritten (Save writes optimizer,
// scheduler and model one after the other), can leave a new
// optimizer_E.pth next to an old model_E.pth; resuming from such a mix
// would silently pair weights with another moment's Adam state. Files of
// format version 2 carry the save's "save_id", which must be the same in
// all three; version-1 files lack it and are compared by "epoch", "step"
// and "steps_per_epoch" only.
func CheckSameSnapshot(dir string, ref Ref) error {
	mp, op, sp := ref.Paths(dir)
	return CheckSameSave(dir, ref, mp, []string{op, sp}, false)
}

// CheckSameSave compares the metadata of model file mp with each of
// others; with skipMissing an absent other file is not compared (eval
// needs only the model).
func CheckSameSave(dir string, ref Ref, mp string, others []string, skipMissing bool) error {
	_, want, err := ReadMeta(mp)
	if err != nil {
		return err
	}
	for _, p := range others {
		_, meta, err := ReadMeta(p)
		if skipMissing && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := sameSave(dir, ref, mp, want, p, meta); err != nil {
			return err
		}
	}
	return nil
}

// sameSave is the error for files mp and p of two saves, or nil.
func sameSave(dir string, ref Ref, mp string, want map[string]any, p string, meta map[string]any) error {
	mix := func(what string) error {
		return fmt.Errorf("checkpoint of %s in %s is a mix of two saves: %s (a save was interrupted, "+
			"or two runs wrote this directory; resume from another checkpoint: %s)",
			ref.Describe(), dir, what, otherCheckpoints(dir, ref))
	}
	for _, key := range []string{"epoch", "step", "steps_per_epoch"} {
		a, errA := MetaInt(want, key)
		b, errB := MetaInt(meta, key)
		if errA == nil && errB == nil && a != b {
			return mix(fmt.Sprintf("%s has %s %d, %s has %d", filepath.Base(mp), key, a, filepath.Base(p), b))
		}
	}
	idA, errA := MetaString(want, "save_id")
	idB, errB := MetaString(meta, "save_id")
	switch {
	case errA != nil && errB != nil: // both of format version 1
		return nil
	case errA != nil || errB != nil || idA != idB:
		return mix(fmt.Sprintf("%s has save id %s, %s has %s", filepath.Base(mp), orNone(idA, errA),
			filepath.Base(p), orNone(idB, errB)))
	}
	return nil
}

func orNone(id string, err error) string {
	if err != nil {
		return "none"
	}
	return id
}

// otherCheckpoints lists the checkpoints of dir other than ref, for
// messages.
func otherCheckpoints(dir string, ref Ref) string {
	have, _ := ListRefs(dir)
	return orNoneList(slices.DeleteFunc(have, func(r Ref) bool { return r == ref }))
}

// orNoneList is refs for a message, or "there is none".
func orNoneList(refs []Ref) string {
	if len(refs) == 0 {
		return "there is none"
	}
	return JoinRefs(refs)
}

// CheckSameModel compares the model settings recorded in epoch's
// model_E.pth with the run's: width, in_channels, num_classes and the data
// set. Keys the file lacks are not compared (a checkpoint imported from
// another program). The error names the file, every key that differs with
// both values, and the spec settings that would match the checkpoint.
func CheckSameModel(dir string, ref Ref, run Meta) error {
	path, _, _ := ref.Paths(dir)
	_, meta, err := ReadMeta(path)
	if err != nil {
		return err
	}
	var diffs, fixes []string
	for _, d := range modelDiffs(meta, run) {
		diffs = append(diffs, fmt.Sprintf("%s is %d in the checkpoint and %d in this run", d.key, d.got, d.want))
		if d.spec != "" {
			fixes = append(fixes, fmt.Sprintf("%s = %d", d.spec, d.got))
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
