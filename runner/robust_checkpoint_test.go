package runner

import (
	"errors"
	"os"
	"path/filepath"
	"resnetlab/spec"
	"strconv"
	"strings"
	"testing"

	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

// trainedCheckpoints runs a tiny spec (width 4, one epoch, a checkpoint
// per epoch) and returns the spec and the run's checkpoint directory.
func trainedCheckpoints(t *testing.T, extra string) (*spec.Spec, string) {
	t.Helper()
	s := tinySpec(t, extra)
	s.Epochs = 1
	if _, err := collect(t, s, RunOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	dir := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
	if have, err := ListCheckpoints(dir); err != nil || len(have) != 1 || have[0] != 1 {
		t.Fatalf("checkpoints %v %v, want epoch 1", have, err)
	}
	return s, dir
}

// resumeErr resumes s (now 2 epochs) from epoch 1 and returns the error.
func resumeErr(t *testing.T, s *spec.Spec, epoch int) error {
	t.Helper()
	s.Epochs = 2
	_, err := collect(t, s, RunOptions{Resume: CheckpointRef{Epoch: epoch}}, nil)
	if err == nil {
		t.Fatal("the resume succeeded")
	}
	return err
}

// Each kind of damage to one of the three files stops the resume with an
// error that names the file and says what is wrong (never a panic, never
// a run that trains on from garbage).
func TestResumeFromDamagedCheckpoint(t *testing.T) {
	cases := []struct {
		file   string // which of the three
		damage func([]byte) []byte
		class  error
		frag   string
	}{
		{"model_1.pth", func(b []byte) []byte { return b[:len(b)/2] }, ErrCheckpointTruncated, "file ends at byte"},
		{"optimizer_1.pth", func(b []byte) []byte { copy(b, "PK\x03\x04"); return b }, ErrCheckpointMagic, `starts with "PK\x03\x04CKPT"`},
		{"lr_scheduler_1.pth", func(b []byte) []byte { b[8] = 9; return b }, ErrCheckpointVersion, "unsupported format version 9"},
		{"model_1.pth", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }, ErrCheckpointChecksum, "SHA-256 of bytes 0.."},
		{"optimizer_1.pth", func([]byte) []byte { return nil }, ErrCheckpointTruncated, "file ends at byte 0 while reading the magic number"},
	}
	s, dir := trainedCheckpoints(t, "")
	for _, c := range cases {
		path := filepath.Join(dir, c.file)
		good, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, c.damage(append([]byte(nil), good...)), 0o644); err != nil {
			t.Fatal(err)
		}
		err = resumeErr(t, s, 1)
		if !errors.Is(err, c.class) || !strings.Contains(err.Error(), "checkpoint "+path+": ") ||
			!strings.Contains(err.Error(), c.frag) {
			t.Errorf("%s: error %v\nwant class %q naming the file and containing %q", c.file, err, c.class, c.frag)
		}
		os.WriteFile(path, good, 0o644)
	}
	// A missing file of the three: the epoch is incomplete.
	os.Remove(filepath.Join(dir, "lr_scheduler_1.pth"))
	if err := resumeErr(t, s, 1); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "lr_scheduler_1.pth") {
		t.Errorf("missing scheduler file: %v", err)
	}
}

func TestResumeFromAbsentEpochListsThePresentOnes(t *testing.T) {
	s, dir := trainedCheckpoints(t, "")
	s.Epochs = 3
	_, err := collect(t, s, RunOptions{Resume: CheckpointRef{Epoch: 2}}, nil)
	if err == nil || !strings.Contains(err.Error(), "no checkpoint "+filepath.Join(dir, "model_2.pth")) ||
		!strings.Contains(err.Error(), "checkpoints in "+dir+": 1)") {
		t.Fatalf("err = %v, want the missing file and the epochs present", err)
	}
}

// A width-4 checkpoint resumed into a width-8 spec names a key and both
// shapes (end to end, whatever else the loader says).
func TestResumeIntoAnotherWidthNamesKeyAndShapes(t *testing.T) {
	s, _ := trainedCheckpoints(t, "")
	s.Width = 8
	err := resumeErr(t, s, 1)
	for _, frag := range []string{`"conv1.weight"`, "[4 3 7 7]", "[8 3 7 7]"} {
		if !strings.Contains(err.Error(), frag) {
			t.Fatalf("error lacks %q:\n%v", frag, err)
		}
	}
}

// checkModelFits says the same in one line, with the setting to change.
func TestCheckModelFits(t *testing.T) {
	be := cpu.New()
	m4 := model.NewResNet18(be, model.Config{Width: 4, InChannels: 3, NumClasses: 10, Seed: 1})
	m8 := model.NewResNet18(be, model.Config{Width: 8, InChannels: 1, NumClasses: 10, Seed: 1})
	dir := t.TempDir()
	saved := ckptMeta{Epoch: 2, Width: 4, InChannels: 3, Classes: 10}
	mp, _, _ := CheckpointPaths(dir, 2)
	if err := WriteCheckpointFile(mp, "model", saved.toMap(), modelEntries(m4.StateDict())); err != nil {
		t.Fatal(err)
	}
	_, ts, err := ReadCheckpointFile(mp, "model")
	if err != nil {
		t.Fatal(err)
	}
	sd := stateDictOf(ts)
	if err := checkModelFits(dir, CheckpointRef{Epoch: 2}, sd, m4, saved); err != nil {
		t.Fatalf("the model it was saved from does not fit: %v", err)
	}
	run := ckptMeta{Width: 8, InChannels: 1, Classes: 10}
	err = checkModelFits(dir, CheckpointRef{Epoch: 2}, sd, m8, run)
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
	if err := checkModelFits(dir, CheckpointRef{Epoch: 2}, sd[1:], m4, saved); err == nil ||
		!strings.Contains(err.Error(), `key "conv1.weight" (shape [4 3 7 7] in the model) is missing`) {
		t.Fatalf("missing key: %v", err)
	}
}

// A checkpoint overwritten in part (a crash between its files) is refused.
func TestCheckSameSnapshot(t *testing.T) {
	dir := t.TempDir()
	write := func(epoch, step int, kinds ...string) {
		meta := ckptMeta{Epoch: epoch, Step: step, StepsPerEpoch: 6}.toMap()
		mp, op, sp := CheckpointPaths(dir, epoch)
		for _, k := range kinds {
			path := map[string]string{"model": mp, "optimizer": op, "lr_scheduler": sp}[k]
			if err := WriteCheckpointFile(path, k, meta, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(1, 6, "optimizer", "lr_scheduler", "model")
	write(2, 3, "optimizer", "lr_scheduler", "model") // Ctrl-C in epoch 2
	if err := checkSameSnapshot(dir, CheckpointRef{Epoch: 2}); err != nil {
		t.Fatalf("one save: %v", err)
	}
	write(2, 6, "optimizer") // epoch 2's end, killed after the first file
	err := checkSameSnapshot(dir, CheckpointRef{Epoch: 2})
	want := "checkpoint of epoch 2 in " + dir + " is a mix of two saves: model_2.pth has step 3, optimizer_2.pth has 6 " +
		"(a save was interrupted, or two runs wrote this directory; resume from another checkpoint: 1)"
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	write(2, 6, "lr_scheduler", "model") // the save completed after all
	if err := checkSameSnapshot(dir, CheckpointRef{Epoch: 2}); err != nil {
		t.Fatalf("completed save: %v", err)
	}
}
