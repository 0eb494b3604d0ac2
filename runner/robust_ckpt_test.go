package runner

import (
	"context"
	"crypto/sha256"
	"os"
	"slices"
	"strings"
	"testing"

	"resnetlab/ckpt"
	"resnetlab/spec"
)

// A checkpoint taken with c mid-epoch keeps its own name: the save at the
// epoch's end does not overwrite it, both are listed, in training order,
// and resuming from the mid-epoch one trains the model of a run that was
// never stopped.
func TestMidEpochCheckpointSurvivesTheEpochEnd(t *testing.T) {
	want := straightRun(t)

	s := tinySpec(t, "")
	cells, _, _ := s.Cells()
	id, dir := cells[0].ID, cells[0].CheckpointDir
	evs, mid, sum := checkpointMidEpoch(t, s, id)
	if mid.Epoch != 1 || mid.Step < 1 {
		t.Fatalf("the c checkpoint is %v, want one inside epoch 1", mid)
	}
	refs, err := ckpt.ListRefs(dir)
	wantRefs := []ckpt.Ref{mid, {Epoch: 1}, {Epoch: 2}}
	if err != nil || !slices.Equal(refs, wantRefs) {
		t.Fatalf("checkpoints %v (%v), want %v", refs, err, wantRefs)
	}
	if eps, _ := ckpt.List(dir); !slices.Equal(eps, []int{1, 2}) {
		t.Fatalf("epoch ends %v, want [1 2]", eps)
	}
	mp, _, _ := mid.Paths(dir)
	if got := sha256File(t, mp); got != sum {
		t.Fatalf("%s changed after it was saved", mp)
	}
	if r := finished(t, evs)[0]; r.ModelSHA256 != want.ModelSHA256 {
		t.Fatalf("run with a c checkpoint: model %s, straight %s", r.ModelSHA256, want.ModelSHA256)
	}
	evs, err = collect(t, s, RunOptions{Resume: mid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := finished(t, evs)[0]; r.ModelSHA256 != want.ModelSHA256 {
		t.Fatalf("resumed from %v: model %s, straight %s", mid, r.ModelSHA256, want.ModelSHA256)
	}
}

// checkpointMidEpoch runs s, pausing after the first step to take a c
// checkpoint, then lets it finish. It returns the events, the checkpoint
// saved and its model file's SHA-256 at that moment.
func checkpointMidEpoch(t *testing.T, s *spec.Spec, id string) ([]Event, ckpt.Ref, [32]byte) {
	t.Helper()
	var mid ckpt.Ref
	var sum [32]byte
	asked := false
	got, err := driveGrid(t, context.Background(), s, RunOptions{}, func(e Event, cmds chan<- Command) {
		switch e := e.(type) {
		case StepDone:
			if !asked {
				asked = true
				cmds <- To{Run: id, Cmd: Pause{}}
			}
		case Paused:
			cmds <- To{Run: id, Cmd: CheckpointNow{}}
		case CheckpointSaved:
			if mid.IsZero() {
				mid = e.Ref()
				sum = sha256File(t, e.Files[0])
				cmds <- To{Run: id, Cmd: Resume{}}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, mid, sum
}

func sha256File(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// A run whose checkpoint directory another run holds fails before it
// trains or writes a checkpoint.
func TestRunRefusesLockedCheckpointDir(t *testing.T) {
	s := tinySpec(t, "")
	s.Epochs = 1
	dir := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
	held, err := ckpt.LockDir(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	_, err = collect(t, s, RunOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "checkpoint directory "+dir+" is in use by another run (pid ") {
		t.Fatalf("got %v", err)
	}
	if have, _ := ckpt.List(dir); len(have) != 0 {
		t.Fatalf("checkpoints %v written into a locked directory", have)
	}
}
