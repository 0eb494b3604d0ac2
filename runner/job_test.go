package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/spec"
	"strings"
	"testing"
)

// tinySpec is a small synthetic run that trains in seconds on the CPU.
func tinySpec(t *testing.T, extra string) *spec.Spec {
	t.Helper()
	dir := t.TempDir()
	src := fmt.Sprintf(`
name = "tiny"
dataset = "synthetic"
width = 4
epochs = 2
batch_size = 20
lr = 2e-3
milestones = [1]
device = "cpu"
checkpoint = %q
results_dir = %q
interval = 1
%s
[synthetic]
train = 120
test = 50
seed = 3
`, filepath.Join(dir, "ckpt-{plugin}-{precision}-{gpus}"), filepath.Join(dir, "results"), extra)
	s, err := spec.Parse(filepath.Join(dir, "tiny.toml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// collect runs a spec headless and returns its events.
func collect(t *testing.T, s *spec.Spec, opts RunOptions, cmds <-chan Command) ([]Event, error) {
	t.Helper()
	events := make(chan Event, 1024)
	var got []Event
	done := make(chan struct{})
	go func() {
		for e := range events {
			got = append(got, e)
		}
		close(done)
	}()
	err := RunSpec(context.Background(), s, opts, events, cmds)
	close(events)
	<-done
	return got, err
}

func finished(t *testing.T, evs []Event) []*report.Result {
	t.Helper()
	var rs []*report.Result
	for _, e := range evs {
		if f, ok := e.(RunFinished); ok {
			rs = append(rs, f.Result)
		}
	}
	return rs
}

// straightRun trains tinySpec(t, "") from start to end, never stopped, and
// returns its result: the model and curve a stopped and resumed run must
// reproduce.
func straightRun(t *testing.T) *report.Result {
	t.Helper()
	evs, err := collect(t, tinySpec(t, ""), RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return finished(t, evs)[0]
}

func TestRunWritesResultsAndCheckpoints(t *testing.T) {
	s := tinySpec(t, "")
	evs, err := collect(t, s, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := finished(t, evs)
	if len(rs) != 1 {
		t.Fatalf("%d runs finished, want 1", len(rs))
	}
	r := rs[0]
	if r.Status != "done" || len(r.EpochResults) != 2 || r.ModelSHA256 == "" || r.ImagesPerSecond <= 0 {
		t.Fatalf("result: %+v", r)
	}
	if r.PeakDeviceBytes[0] <= 0 {
		t.Fatalf("no peak memory recorded: %v", r.PeakDeviceBytes)
	}
	dir := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
	have, err := ckpt.List(dir)
	if err != nil || len(have) != 2 {
		t.Fatalf("checkpoints in %s: %v %v, want epochs 1 and 2", dir, have, err)
	}
	sum, _ := ckpt.FileSHA256(filepath.Join(dir, "model_2.pth"))
	if sum != r.ModelSHA256 {
		t.Fatalf("model_sha256 %s is not the digest of model_2.pth (%s)", r.ModelSHA256, sum)
	}
	if _, err := os.Stat(report.ResultPath(s.ResultsDir, r)); err != nil {
		t.Fatalf("result file: %v", err)
	}
	acc, _, err := Eval(context.Background(), EvalOptions{CheckpointDir: dir, Epoch: 2, Device: "cpu"})
	if err != nil || acc != r.FinalTestAcc {
		t.Fatalf("eval of model_2: %v %v, want the run's final accuracy %v", acc, err, r.FinalTestAcc)
	}
}

// oneAndTwoRankCells are the [[run]] cells of the tests that compare two
// ways of training: fp32 on one rank, and fp16 ZeRO over two ranks.
var oneAndTwoRankCells = []string{`plugin = "torch_ddp"
precision = "fp32"
gpus = 1`, `plugin = "low_level_zero"
precision = "fp16"
gpus = 2`}

// Two epochs straight and one epoch + resume must give the same model
// file, bit for bit, for every plugin on the CPU backend.
func TestResumeIsBitExact(t *testing.T) {
	for _, cell := range oneAndTwoRankCells {
		straight := tinySpec(t, "[[run]]\n"+cell)
		evs0, err := collect(t, straight, RunOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := finished(t, evs0)[0].ModelSHA256

		resumed := tinySpec(t, "[[run]]\n"+cell)
		resumed.Epochs = 1
		if _, err := collect(t, resumed, RunOptions{}, nil); err != nil {
			t.Fatal(err)
		}
		resumed.Epochs = 2
		evs, err := collect(t, resumed, RunOptions{Resume: ckpt.Ref{Epoch: 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := finished(t, evs)[0]
		if r.ModelSHA256 != want {
			t.Fatalf("%s: resumed run's model %s differs from the straight run's %s", r.Run, r.ModelSHA256, want)
		}
		// The checkpoint carries epoch 1's results: the resumed run reports
		// the same curve as the straight one.
		full := finished(t, evs0)[0].EpochResults
		if len(r.EpochResults) != 2 {
			t.Fatalf("resumed run reports epochs %+v, want 1 and 2", r.EpochResults)
		}
		for i, e := range r.EpochResults {
			if e.Epoch != full[i].Epoch || e.Loss != full[i].Loss || e.TestAcc != full[i].TestAcc {
				t.Fatalf("resumed run's epoch %+v differs from the straight run's %+v", e, full[i])
			}
		}
	}
}

func TestTargetAccFailsTheRun(t *testing.T) {
	s := tinySpec(t, "target_acc = 0.999")
	s.Epochs = 1
	_, err := collect(t, s, RunOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "below target_acc 99.90%") {
		t.Fatalf("err = %v, want a target_acc failure", err)
	}
}

// A fresh run of a spec whose checkpoint directory holds an earlier run's
// checkpoints touches none of them: it says so and saves in DIR-run2; a
// resume then continues the newest run, from DIR-run2.
func TestFreshRunKeepsEarlierCheckpoints(t *testing.T) {
	s := tinySpec(t, "")
	dir := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
	if _, err := collect(t, s, RunOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(dir, "model_2.pth"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model_2.pth"), append(first, 'x'), 0o644); err != nil {
		t.Fatal(err) // marked: a save over it would drop the mark
	}
	evs, err := collect(t, s, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var said bool
	var saved []string
	for _, e := range evs {
		switch e := e.(type) {
		case Log:
			said = said || strings.Contains(e.Text, "checkpoint directory "+dir+" holds an earlier run's checkpoints") &&
				strings.Contains(e.Text, dir+"-run2")
		case CheckpointSaved:
			saved = append(saved, e.Dir)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "model_2.pth")); string(got) != string(first)+"x" || !said {
		t.Fatalf("the earlier run's model_2.pth was touched (%v) or the move not said (%v)", string(got) != string(first)+"x", said)
	}
	if len(saved) != 2 || saved[0] != dir+"-run2" || saved[1] != dir+"-run2" {
		t.Fatalf("the second fresh run saved in %v, want %s-run2 twice", saved, dir)
	}
	evs, err = collect(t, s, RunOptions{Resume: ckpt.Ref{Epoch: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if c, ok := e.(CheckpointSaved); ok && c.Dir != dir+"-run2" {
			t.Errorf("the resumed run saved in %s, want the newest run's %s-run2", c.Dir, dir)
		}
	}
}

// TestUnwritableResultFailsTheRun: a run whose result file cannot be
// written ends failed, in its error and in the result the table shows.
func TestUnwritableResultFailsTheRun(t *testing.T) {
	s := tinySpec(t, "")
	block := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(block, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.ResultsDir = filepath.Join(block, "results") // a path through a regular file
	evs, err := collect(t, s, RunOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), block) {
		t.Fatalf("run error %v, want one naming %s", err, block)
	}
	rs := finished(t, evs)
	if len(rs) != 1 || rs[0].Status != report.StatusFailed || !strings.Contains(rs[0].Error, block) {
		t.Fatalf("results %+v, want one failed run naming %s", rs, block)
	}
}
