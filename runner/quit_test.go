package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/spec"
	"strings"
	"testing"

	"resnetlab/kernels/cuda"
)

// twoRunGrid is a tiny spec of two runs, one after the other.
func twoRunGrid(t *testing.T) *spec.Spec {
	return tinySpec(t, "[[run]]\nplugin = \"torch_ddp\"\n[[run]]\nplugin = \"low_level_zero\"\n")
}

// snapshot reads every file under dirs (a missing dir reads as empty).
func snapshot(t *testing.T, dirs ...string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				b, _ := os.ReadFile(p)
				files[p] = b
			}
			return nil
		})
	}
	return files
}

func sameFiles(t *testing.T, what string, before, after map[string][]byte) {
	t.Helper()
	for p, b := range after {
		if old, ok := before[p]; !ok || !bytes.Equal(old, b) {
			t.Errorf("%s: %s was written", what, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s: %s was removed", what, p)
		}
	}
}

// Quit during run 1 of a grid stops the grid: run 1 checkpoints (when
// asked), ends interrupted and says so in its result; run 2 never starts and
// its earlier result file and checkpoints are left byte for byte.
func TestQuitStopsTheGrid(t *testing.T) {
	for _, save := range []bool{true, false} {
		s := twoRunGrid(t)
		// A finished earlier session of the whole grid: run 2's files to keep.
		if _, err := collect(t, s, RunOptions{}, nil); err != nil {
			t.Fatal(err)
		}
		cells, _, _ := s.Cells()
		run1, run2 := cells[0], cells[1]
		keep := snapshot(t, run2.CheckpointDir, s.ResultsDir)
		for p := range keep {
			if strings.Contains(p, run1.ID) {
				delete(keep, p)
			}
		}
		os.RemoveAll(run1.CheckpointDir)

		sent := false
		got, err := driveGrid(t, context.Background(), s, RunOptions{StayOpen: true}, func(e Event, cmds chan<- Command) {
			if sd, ok := e.(StepDone); ok && sd.Run == run1.ID && sd.Step == 2 && !sent {
				cmds <- Quit{Checkpoint: save}
				sent = true
			}
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("checkpoint %v: RunSpec = %v, want an interruption", save, err)
		}
		for _, e := range got {
			if rs, ok := e.(RunStarted); ok && rs.Info.ID == run2.ID {
				t.Fatalf("checkpoint %v: run 2 started after Quit", save)
			}
		}
		rs := finished(t, got)
		if len(rs) != 1 || rs[0] == nil || rs[0].Status != report.StatusInterrupted {
			t.Fatalf("checkpoint %v: finished %v, want run 1 interrupted only", save, rs)
		}
		after := snapshot(t, run2.CheckpointDir, s.ResultsDir)
		for p := range after {
			if strings.Contains(p, run1.ID) {
				delete(after, p)
			}
		}
		sameFiles(t, "run 2", keep, after)
		saved, _ := ckpt.ListRefs(run1.CheckpointDir)
		if save != (len(saved) == 1) {
			t.Errorf("checkpoint %v: run 1 saved %v", save, saved)
		}
	}
}

// A check that fails before training (no data set; a device the machine
// lacks) is reported once, on every run, and no result file is touched.
func TestPreflightFailureKeepsResults(t *testing.T) {
	s := tinySpec(t, "")
	if _, err := collect(t, s, RunOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, s.ResultsDir)
	if len(before) != 1 {
		t.Fatalf("want one result file from the good run, have %v", before)
	}
	cases := map[string]func(*spec.Spec){
		"no data": func(s *spec.Spec) { s.Dataset, s.DataDir = "cifar10", t.TempDir() },
	}
	if cuda.Available() != nil {
		cases["no GPU"] = func(s *spec.Spec) { s.Device = "cuda" }
	}
	for name, spoil := range cases {
		bad := *s
		spoil(&bad)
		evs, err := collect(t, &bad, RunOptions{}, nil)
		var pe *PreflightError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: RunSpec = %v, want a PreflightError", name, err)
		}
		if strings.Count(err.Error(), pe.Err.Error()) != 1 {
			t.Errorf("%s: the error repeats: %v", name, err)
		}
		n := 0
		for _, e := range evs {
			if f, ok := e.(RunFinished); ok {
				n++
				if !errors.As(f.Err, &pe) || f.Result != nil {
					t.Errorf("%s: RunFinished %+v, want the preflight error and no result", name, f)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: %d RunFinished events, want one per run", name, n)
		}
		sameFiles(t, name, before, snapshot(t, s.ResultsDir))
	}
}

// Quit before a run's first step (it can land as the run starts) leaves no
// step-0 checkpoint and no result: the earlier session's files stay.
func TestQuitBeforeFirstStepTouchesNothing(t *testing.T) {
	s := tinySpec(t, "")
	if _, err := collect(t, s, RunOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	cells, _, _ := s.Cells()
	before := snapshot(t, cells[0].CheckpointDir, s.ResultsDir)
	cmds := make(chan Command, 1)
	cmds <- Quit{Checkpoint: true} // read at the first step boundary, before step 1
	_, err := collect(t, s, RunOptions{}, cmds)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunSpec = %v, want an interruption", err)
	}
	sameFiles(t, "run quit before its first step", before, snapshot(t, cells[0].CheckpointDir, s.ResultsDir))
}

// A checkpoint asked for before the first step saves nothing: it would be
// the untrained model under epoch 1's name.
func TestNoCheckpointBeforeFirstStep(t *testing.T) {
	s := tinySpec(t, "")
	cells, _, _ := s.Cells()
	cmds := make(chan Command, 1)
	cmds <- To{Run: cells[0].ID, Cmd: CheckpointNow{}}
	evs, err := collect(t, s, RunOptions{}, cmds)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		switch e.(type) {
		case StepDone:
			return
		case CheckpointSaved:
			t.Fatalf("a checkpoint was saved before the first step: %+v", e)
		}
	}
	t.Fatal("the run trained no step")
}
