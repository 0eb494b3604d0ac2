package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"resnetlab/report"
	"resnetlab/runner"
)

func TestHeadlessLines(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(1000, 0)
	h := newHeadless(&out, func() time.Time { return clock })
	info := runner.RunInfo{ID: "gemini-fp16-2", Plugin: "gemini", Precision: "fp16", WorldSize: 2, Dataset: "cifar10",
		Epochs: 80, Backend: "cuda", Devices: []string{"cuda:0", "cuda:1"}, StepsPerEpoch: 250}
	step := func(s int, advance time.Duration) {
		clock = clock.Add(advance)
		h.handle(runner.StepDone{Run: info.ID, Epoch: 1, Step: s, Steps: 250, Loss: 2.25, LossScale: 32,
			StepTime: 12500 * time.Microsecond, ImagesPerSec: 16000, Skipped: s == 3})
	}
	queued := info
	queued.Backend, queued.Devices = "", nil // not known yet when queued
	h.handle(runner.RunQueued{Info: queued})
	h.handle(runner.RunStarted{Info: info})
	step(1, 0)             // first step: printed
	step(2, 9*time.Second) // 9 s later: throttled
	step(3, 1*time.Second) // 10 s after the last line: printed
	step(4, 1*time.Second) // throttled
	h.handle(runner.MemoryUsage{Run: info.ID, DevicePeak: 1 << 30})
	h.handle(runner.Log{Run: info.ID, Level: "warn", Text: "loss scale fell to 1"})
	h.handle(runner.Log{Run: info.ID, Level: "info", Text: "warm-up done"})
	h.handle(runner.Log{Level: "info", Text: "using 2 GPUs"})
	h.handle(runner.EpochDone{Run: info.ID, Epoch: 1, Loss: 1.83, TestAcc: 0.4567, Seconds: 31.25, LR: 0.002})
	h.handle(runner.EpochDone{Run: info.ID, Epoch: 2, Loss: 1.5, TestAcc: math.NaN(), Seconds: 31.25, LR: 0.002}) // eval_every skipped it
	h.handle(runner.CheckpointSaved{Run: info.ID, Epoch: 5, Dir: "ck", Files: []string{"a", "b", "c"}})
	h.handle(runner.Paused{Run: info.ID, Epoch: 6, Step: 7})
	h.handle(runner.Resumed{Run: info.ID})
	h.handle(runner.RunStarted{Info: info, StartEpoch: 5})
	h.handle(runner.RunFinished{Run: info.ID, Result: &report.Result{Run: info.ID, Status: "done",
		FinalTestAcc: 0.8512, BestTestAcc: 0.854, TrainSeconds: 2500, ImagesPerSecond: 16000,
		EpochResults: []report.EpochResult{{Epoch: 1}}, Epochs: 80}})
	want := `[gemini-fp16-2] queued: gemini fp16, 2 ranks, cifar10, 80 epochs x 250 steps
[gemini-fp16-2] started on cuda (cuda:0, cuda:1)
[gemini-fp16-2] epoch 1/80 step 1/250: loss 2.2500, loss scale 32, 12.5 ms/step, 16000 img/s, ETA 4m10s
[gemini-fp16-2] epoch 1/80 step 3/250: loss 2.2500, loss scale 32 (step skipped: inf/nan gradients), 12.5 ms/step, 16000 img/s, ETA 4m10s
[gemini-fp16-2] warn: loss scale fell to 1
[gemini-fp16-2] warm-up done
using 2 GPUs
[gemini-fp16-2] epoch 1/80: loss 1.8300, test acc 45.67%, lr 0.002, 31.2 s, ETA 41m09s
[gemini-fp16-2] epoch 2/80: loss 1.5000, test acc not evaluated, lr 0.002, 31.2 s, ETA 40m38s
[gemini-fp16-2] checkpoint of epoch 5 saved in ck (3 files; --resume 5 continues from it)
[gemini-fp16-2] paused at epoch 6 step 7
[gemini-fp16-2] resumed
[gemini-fp16-2] resumed from the checkpoint of epoch 5 on cuda (cuda:0, cuda:1)
[gemini-fp16-2] done: final test acc 85.12% (best 85.40%), 2500.0 s of training, 16000 img/s
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	h.summary(0)
	if !strings.HasPrefix(out.String(), "\nRUN ") || !strings.Contains(out.String(), "gemini-fp16-2") {
		t.Fatalf("summary:\n%s", out.String())
	}
	if len(h.failed) != 0 {
		t.Fatal("no run failed")
	}
}

// In a grid of several runs the checkpoint line's command names the run
// (--resume alone would resume every run of the grid); alone, it does not.
func TestHeadlessCheckpointLineNamesTheRun(t *testing.T) {
	for _, runs := range [][]string{{"a"}, {"a", "b"}} {
		var out bytes.Buffer
		h := newHeadless(&out, time.Now)
		h.progress = newProgress(runs)
		h.handle(runner.CheckpointSaved{Run: "a", Epoch: 2, Step: 3, Dir: "ck", Files: []string{"x"}})
		want := "--resume 2@3 continues"
		if len(runs) > 1 {
			want = "--resume 2@3 --run a continues"
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("%d runs: %q, want %q in it", len(runs), out.String(), want)
		}
	}
}
