package runner

import (
	"context"
	"crypto/sha256"
	"os"
	"resnetlab/spec"
	"slices"
	"strings"
	"testing"
)

func TestParseCheckpointRef(t *testing.T) {
	for _, c := range []struct {
		in   string
		want CheckpointRef
	}{{"3", CheckpointRef{Epoch: 3}}, {"3@120", CheckpointRef{Epoch: 3, Step: 120}}, {" 1@1 ", CheckpointRef{Epoch: 1, Step: 1}}} {
		got, err := ParseCheckpointRef(c.in)
		if err != nil || got != c.want || (got.String() != strings.TrimSpace(c.in)) {
			t.Errorf("%q: %v %v (String %q)", c.in, got, err, got.String())
		}
	}
	for _, in := range []string{"", "0", "-1", "x", "3@", "3@0", "3@-2", "@4", "3@4@5", "3.5"} {
		if r, err := ParseCheckpointRef(in); err == nil {
			t.Errorf("%q accepted as %v", in, r)
		}
	}
}

func TestRefOfModelFile(t *testing.T) {
	for name, want := range map[string]CheckpointRef{
		"model_1.pth": {Epoch: 1}, "model_12-step7.pth": {Epoch: 12, Step: 7},
	} {
		if got, ok := refOfModelFile(name); !ok || got != want {
			t.Errorf("%s: %v %v", name, got, ok)
		}
		if _, _, sp := want.Paths(""); !strings.HasPrefix(sp, "lr_scheduler_") {
			t.Errorf("%v: scheduler file %s", want, sp)
		}
		if mp, _, _ := want.Paths(""); mp != name {
			t.Errorf("%v: model file %s, want %s", want, mp, name)
		}
	}
	for _, name := range []string{"model_05.pth", "model_1-step0.pth", "model_1-step07.pth", "model_1-step.pth", "model_x.pth", "optimizer_1.pth"} {
		if r, ok := refOfModelFile(name); ok {
			t.Errorf("%s read as %v", name, r)
		}
	}
}

// A checkpoint taken with c mid-epoch keeps its own name: the save at the
// epoch's end does not overwrite it, both are listed, in training order,
// and resuming from the mid-epoch one trains the model of a run that was
// never stopped.
func TestMidEpochCheckpointSurvivesTheEpochEnd(t *testing.T) {
	straight := tinySpec(t, "")
	evs, err := collect(t, straight, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := finished(t, evs)[0]

	s := tinySpec(t, "")
	cells, _, _ := s.Cells()
	id, dir := cells[0].ID, cells[0].CheckpointDir
	evs, mid, sum := checkpointMidEpoch(t, s, id)
	if mid.Epoch != 1 || mid.Step < 1 {
		t.Fatalf("the c checkpoint is %v, want one inside epoch 1", mid)
	}
	refs, err := ListCheckpointRefs(dir)
	wantRefs := []CheckpointRef{mid, {Epoch: 1}, {Epoch: 2}}
	if err != nil || !slices.Equal(refs, wantRefs) {
		t.Fatalf("checkpoints %v (%v), want %v", refs, err, wantRefs)
	}
	if eps, _ := ListCheckpoints(dir); !slices.Equal(eps, []int{1, 2}) {
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
func checkpointMidEpoch(t *testing.T, s *spec.Spec, id string) ([]Event, CheckpointRef, [32]byte) {
	t.Helper()
	events, cmds := make(chan Event), make(chan Command, 4)
	var got []Event
	var mid CheckpointRef
	var sum [32]byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		asked := false
		for e := range events {
			got = append(got, e)
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
		}
	}()
	err := RunSpec(context.Background(), s, RunOptions{}, events, cmds)
	close(events)
	<-done
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
