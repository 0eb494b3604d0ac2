package runner

import (
	"errors"
	"os"
	"path/filepath"
	"resnetlab/ckpt"
	"resnetlab/spec"
	"strings"
	"testing"
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
	if have, err := ckpt.List(dir); err != nil || len(have) != 1 || have[0] != 1 {
		t.Fatalf("checkpoints %v %v, want epoch 1", have, err)
	}
	return s, dir
}

// resumeErr resumes s (now 2 epochs) from epoch 1 and returns the error.
func resumeErr(t *testing.T, s *spec.Spec, epoch int) error {
	t.Helper()
	s.Epochs = 2
	_, err := collect(t, s, RunOptions{Resume: ckpt.Ref{Epoch: epoch}}, nil)
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
		{"model_1.pth", func(b []byte) []byte { return b[:len(b)/2] }, ckpt.ErrTruncated, "file ends at byte"},
		{"optimizer_1.pth", func(b []byte) []byte { copy(b, "PK\x03\x04"); return b }, ckpt.ErrMagic, `starts with "PK\x03\x04CKPT"`},
		{"lr_scheduler_1.pth", func(b []byte) []byte { b[8] = 9; return b }, ckpt.ErrVersion, "unsupported format version 9"},
		{"model_1.pth", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }, ckpt.ErrChecksum, "SHA-256 of bytes 0.."},
		{"optimizer_1.pth", func([]byte) []byte { return nil }, ckpt.ErrTruncated, "file ends at byte 0 while reading the magic number"},
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
	_, err := collect(t, s, RunOptions{Resume: ckpt.Ref{Epoch: 2}}, nil)
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
