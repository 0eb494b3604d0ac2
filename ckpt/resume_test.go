package ckpt

import (
	"strconv"
	"strings"
	"testing"

	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

// CheckModelFits says in one line why a checkpoint does not fit the
// run's model, with the setting to change.
func TestCheckModelFits(t *testing.T) {
	be := cpu.New()
	m4 := model.NewResNet18(be, model.Config{Width: 4, InChannels: 3, NumClasses: 10, Seed: 1})
	m8 := model.NewResNet18(be, model.Config{Width: 8, InChannels: 1, NumClasses: 10, Seed: 1})
	dir := t.TempDir()
	saved := Meta{Epoch: 2, Width: 4, InChannels: 3, Classes: 10}
	mp, _, _ := Paths(dir, 2)
	if err := WriteFile(mp, "model", saved.toMap(), modelEntries(m4.StateDict())); err != nil {
		t.Fatal(err)
	}
	_, ts, err := ReadFile(mp, "model")
	if err != nil {
		t.Fatal(err)
	}
	sd := StateDict(ts)
	if err := CheckModelFits(dir, Ref{Epoch: 2}, sd, m4, saved); err != nil {
		t.Fatalf("the model it was saved from does not fit: %v", err)
	}
	run := Meta{Width: 8, InChannels: 1, Classes: 10}
	err = CheckModelFits(dir, Ref{Epoch: 2}, sd, m8, run)
	if err == nil {
		t.Fatal("width 4 fits width 8")
	}
	differ := 0 // every parameter's shape depends on the width but fc.bias
	for _, p := range m8.Params() {
		if p.Name != "fc.bias" {
			differ++
		}
	}
	want := "checkpoint " + mp + ` does not fit this run's model: key "conv1.weight" has shape [4 3 7 7] in the checkpoint ` +
		"and [8 1 7 7] in the model (" + strconv.Itoa(differ-1) + " more parameters differ); the checkpoint was saved with " +
		"width 4, this run has 8; in_channels 3, this run has 1 (want width = 4 and in_channels = 3 in the spec, " +
		"or resume = 0 to start afresh)"
	if err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	// A state dict without a parameter.
	if err := CheckModelFits(dir, Ref{Epoch: 2}, sd[1:], m4, saved); err == nil ||
		!strings.Contains(err.Error(), `key "conv1.weight" (shape [4 3 7 7] in the model) is missing`) {
		t.Fatalf("missing key: %v", err)
	}
}

// A checkpoint overwritten in part (a crash between its files) is refused.
func TestCheckSameSnapshot(t *testing.T) {
	dir := t.TempDir()
	write := func(epoch, step int, kinds ...string) {
		meta := Meta{Epoch: epoch, Step: step, StepsPerEpoch: 6}.toMap()
		mp, op, sp := Paths(dir, epoch)
		for _, k := range kinds {
			path := map[string]string{"model": mp, "optimizer": op, "lr_scheduler": sp}[k]
			if err := WriteFile(path, k, meta, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(1, 6, "optimizer", "lr_scheduler", "model")
	write(2, 3, "optimizer", "lr_scheduler", "model") // Ctrl-C in epoch 2
	if err := CheckSameSnapshot(dir, Ref{Epoch: 2}); err != nil {
		t.Fatalf("one save: %v", err)
	}
	write(2, 6, "optimizer") // epoch 2's end, killed after the first file
	err := CheckSameSnapshot(dir, Ref{Epoch: 2})
	want := "checkpoint of epoch 2 in " + dir + " is a mix of two saves: model_2.pth has step 3, optimizer_2.pth has 6 " +
		"(a save was interrupted, or two runs wrote this directory; resume from another checkpoint: 1)"
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	write(2, 6, "lr_scheduler", "model") // the save completed after all
	if err := CheckSameSnapshot(dir, Ref{Epoch: 2}); err != nil {
		t.Fatalf("completed save: %v", err)
	}
}
