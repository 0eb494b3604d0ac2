package runner

import (
	"os"
	"path/filepath"
	"regexp"
	"resnetlab/ckpt"
	"slices"
	"strings"
	"testing"
)

// A width-8 checkpoint resumed by a width-16 spec stops before any rank
// loads it or trains, with one line that names the checkpoint file (its
// directory and epoch), a key with both shapes, and both widths. A Gemini
// run, whose engine may hold no tensor for an evicted parameter, is
// refused the same way (from the files' settings alone when it must).
func TestResumeWidth8IntoWidth16(t *testing.T) {
	s := tinySpec(t, "")
	s.Width, s.Epochs = 8, 1
	if _, err := collect(t, s, RunOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	dir := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
	mp, _, _ := ckpt.Paths(dir, 1)

	s.Width, s.Epochs = 16, 2
	evs, err := collect(t, s, RunOptions{Resume: ckpt.Ref{Epoch: 1}}, nil)
	if err == nil {
		t.Fatal("a width-8 checkpoint resumed into a width-16 run")
	}
	want := "checkpoint " + mp + ` does not fit this run's model: key "conv1.weight" has shape [8 3 7 7] ` +
		"in the checkpoint and [16 3 7 7] in the model"
	for _, frag := range []string{want, "saved with width 8, this run has 16", "want width = 8 in the spec"} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("error lacks %q:\n%v", frag, err)
		}
	}
	if strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("error spans several lines:\n%v", err)
	}
	refusedBeforeTraining(t, evs, dir)

	// The same files in a Gemini run's directory.
	gs := tinySpec(t, "[[run]]\nplugin = \"gemini\"\nprecision = \"fp16\"\n")
	gs.Width = 16
	gdir := strings.ReplaceAll(gs.Checkpoint, "{plugin}-{precision}-{gpus}", "gemini-fp16-1")
	copyDir(t, dir, gdir)
	evs, err = collect(t, gs, RunOptions{Resume: ckpt.Ref{Epoch: 1}}, nil)
	gmp, _, _ := ckpt.Paths(gdir, 1)
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), gmp) ||
		!regexp.MustCompile(`width (is )?8.*16`).MatchString(err.Error()) {
		t.Fatalf("gemini: %v\nwant the file and both widths", err)
	}
	refusedBeforeTraining(t, evs, gdir)
}

// refusedBeforeTraining checks that a run whose resume was refused
// trained nothing, saved nothing and says it failed.
func refusedBeforeTraining(t *testing.T, evs []Event, dir string) {
	t.Helper()
	for _, e := range evs {
		switch e.(type) {
		case StepDone, EpochDone, CheckpointSaved:
			t.Fatalf("the refused run went on: %#v", e)
		}
	}
	if rs := finished(t, evs); len(rs) != 1 || rs[0].Status != "failed" || rs[0].Error == "" {
		t.Fatalf("results %+v, want one failed", rs)
	}
	if have, err := ckpt.List(dir); err != nil || !slices.Equal(have, []int{1}) {
		t.Fatalf("checkpoints %v %v, want epoch 1 only", have, err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(to, e.Name()), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// setMeta rewrites one metadata value of a checkpoint file.
func setMeta(t *testing.T, path, kind, key string, v any) {
	t.Helper()
	meta, ts, err := ckpt.ReadFile(path, kind)
	if err != nil {
		t.Fatal(err)
	}
	meta[key] = v
	if err := ckpt.WriteFile(path, kind, meta, ts); err != nil {
		t.Fatal(err)
	}
}

// Shapes can match while the data set differs (cifar10 and synthetic both
// have 3 channels and 10 classes): the resume names the key and both
// values, and what to set.
func TestResumeFromAnotherDataset(t *testing.T) {
	s, dir := trainedCheckpoints(t, "")
	mp, _, _ := ckpt.Paths(dir, 1)
	setMeta(t, mp, "model", "dataset", "cifar10")
	err := resumeErr(t, s, 1)
	want := "resume from " + dir + " epoch 1: checkpoint " + mp + ` was saved for another model: dataset is "cifar10" ` +
		`in the checkpoint and "synthetic" in this run (want dataset = "cifar10" in the spec, or resume = 0 to start afresh)`
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// The resume refuses files of two different saves (ckpt.CheckSameSnapshot).
func TestResumeFromMixedSaves(t *testing.T) {
	s, dir := trainedCheckpoints(t, "")
	_, op, _ := ckpt.Paths(dir, 1)
	setMeta(t, op, "optimizer", "step", 2)
	err := resumeErr(t, s, 1)
	if !strings.Contains(err.Error(), "checkpoint of epoch 1 in "+dir+" is a mix of two saves: model_1.pth has step 6, optimizer_1.pth has 2") {
		t.Fatalf("got %v", err)
	}
}

func TestCheckSameModel(t *testing.T) {
	dir := t.TempDir()
	write := func(meta map[string]any) {
		mp, _, _ := ckpt.Paths(dir, 3)
		if err := ckpt.WriteFile(mp, "model", meta, nil); err != nil {
			t.Fatal(err)
		}
	}
	run := ckpt.Meta{Width: 16, InChannels: 1, Classes: 10, Dataset: "fashion-mnist"}
	write(map[string]any{"epoch": 3}) // imported from elsewhere: nothing to compare
	if err := ckpt.CheckSameModel(dir, ckpt.Ref{Epoch: 3}, run); err != nil {
		t.Fatalf("no settings recorded: %v", err)
	}
	write(map[string]any{"width": 16, "in_channels": 1, "num_classes": 10, "dataset": "FMNIST"})
	if err := ckpt.CheckSameModel(dir, ckpt.Ref{Epoch: 3}, run); err != nil {
		t.Fatalf("another spelling of the same data set: %v", err)
	}
	write(map[string]any{"width": 8, "in_channels": 3, "num_classes": 100, "dataset": "cifar10"})
	mp, _, _ := ckpt.Paths(dir, 3)
	want := "resume from " + dir + " epoch 3: checkpoint " + mp + " was saved for another model: " +
		"width is 8 in the checkpoint and 16 in this run; in_channels is 3 in the checkpoint and 1 in this run; " +
		"num_classes is 100 in the checkpoint and 10 in this run; " +
		`dataset is "cifar10" in the checkpoint and "fashion-mnist" in this run ` +
		`(want width = 8 and in_channels = 3 and dataset = "cifar10" in the spec, or resume = 0 to start afresh)`
	if err := ckpt.CheckSameModel(dir, ckpt.Ref{Epoch: 3}, run); err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	write(map[string]any{"num_classes": 100})
	if err := ckpt.CheckSameModel(dir, ckpt.Ref{Epoch: 3}, run); err == nil ||
		!strings.HasSuffix(err.Error(), "num_classes is 100 in the checkpoint and 10 in this run (want resume = 0 to start afresh)") {
		t.Fatalf("classes only: %v", err)
	}
}

// A run resumed in a new process tells the front ends what it has behind
// it: RunStarted carries the epochs before its checkpoint as the first
// session recorded them, and the memory of every rank follows at once, so
// a run resumed from its last epoch, which trains nothing, still reports
// its accuracy history and what it holds (its result's peaks are not 0).
func TestResumedRunTellsItsHistory(t *testing.T) {
	s := tinySpec(t, "")
	first := finished(t, mustCollect(t, s))[0]
	for _, from := range []int{1, 2} {
		evs, err := collect(t, s, RunOptions{Resume: ckpt.Ref{Epoch: from}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		at := slices.IndexFunc(evs, func(e Event) bool { _, ok := e.(RunStarted); return ok })
		if at < 0 || at+1 >= len(evs) {
			t.Fatalf("from %d: no RunStarted", from)
		}
		st := evs[at].(RunStarted)
		if st.StartEpoch != from || len(st.History) != from || st.History[from-1].TestAcc != first.EpochResults[from-1].TestAcc ||
			st.History[0].Seconds != first.EpochResults[0].Seconds {
			t.Errorf("from %d: RunStarted %+v, want the first %d epochs of %+v", from, st, from, first.EpochResults)
		}
		if u, ok := evs[at+1].(MemoryUsage); !ok || u.DevicePeak == 0 {
			t.Errorf("from %d: after RunStarted comes %#v, want the rank's memory", from, evs[at+1])
		}
		res := finished(t, evs)[0]
		if res.PeakDeviceBytes[0] == 0 || res.PeakHostBytes[0] == 0 || len(res.EpochResults) != 2 || res.FinalTestAcc != first.FinalTestAcc {
			t.Errorf("from %d: result peaks %v %v, %d epochs, final acc %v (first run %v)", from, res.PeakDeviceBytes,
				res.PeakHostBytes, len(res.EpochResults), res.FinalTestAcc, first.FinalTestAcc)
		}
	}
}
