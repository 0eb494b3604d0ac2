package runner

import (
	"fmt"
	"resnetlab/spec"
	"strings"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/graphtest"
)

// graphSpec trains torch_ddp fp32, torch_ddp fp16 and low_level_zero (ZeRO-2)
// fp16 for 2 epochs of 6 steps. The fp16 loss scale starts so high that the
// first steps overflow and back off, then grows every 2 clean steps: each
// change must re-capture. Each epoch's evaluation drops the graphs.
func graphSpec(t *testing.T, graphs bool) *spec.Spec {
	on := "false"
	if graphs {
		on = "true"
	}
	return tinySpec(t, `cuda_graphs = `+on+`
[grid]
plugin = ["torch_ddp", "torch_ddp_fp16", "low_level_zero"]
[zero]
stage = 2
[fp16]
initial_scale = 4194304.0
growth_interval = 2
backoff_factor = 0.25
hysteresis = 1
`)
}

func withRecorder(t *testing.T) {
	trainWrap = func(be kernels.Backend) kernels.Backend { return graphtest.New(be) }
	t.Cleanup(func() { trainWrap = nil })
}

func TestCUDAGraphsMatchEager(t *testing.T) {
	eagerEvs, err := collect(t, graphSpec(t, false), RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	withRecorder(t)
	graphEvs, err := collect(t, graphSpec(t, true), RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eager, graph := finished(t, eagerEvs), finished(t, graphEvs)
	if len(eager) != 3 || len(graph) != 3 {
		t.Fatalf("%d eager and %d graph runs finished, want 3 each", len(eager), len(graph))
	}
	for i, e := range eager {
		g := graph[i]
		if e.ModelSHA256 == "" || e.ModelSHA256 != g.ModelSHA256 {
			t.Errorf("%s: model sha %q eager, %q with graphs", e.Run, e.ModelSHA256, g.ModelSHA256)
		}
		for k := range e.EpochResults {
			if e.EpochResults[k].Loss != g.EpochResults[k].Loss {
				t.Errorf("%s epoch %d: loss %v eager, %v with graphs", e.Run, k+1, e.EpochResults[k].Loss, g.EpochResults[k].Loss)
			}
		}
	}
	// 2 epochs x (6 steps - 2 warm-up) replays per run; fp16 captures again
	// at every loss scale change.
	if n := countLogs(graphEvs, "steps replayed from"); n != 3 {
		t.Errorf("%d runs logged graph replays, want 3", n)
	}
	if countLogs(graphEvs, "8 steps replayed from 2 captures") != 1 {
		t.Errorf("fp32 run: want 8 replays from 2 captures (one per epoch): %v", logsWith(graphEvs, "replayed"))
	}
	if scaled := logsWith(graphEvs, "replayed"); !anyCapturesAbove(scaled, 2) {
		t.Errorf("no fp16 run re-captured for a loss scale change: %v", scaled)
	}
}

func TestCUDAGraphsElsewhereLogEagerSteps(t *testing.T) {
	evs, err := collect(t, tinySpec(t, "cuda_graphs = true\n"), RunOptions{}, nil)
	if err != nil {
		t.Fatalf("cuda_graphs on the CPU backend must be a logged no-op: %v", err)
	}
	if countLogs(evs, "cuda_graphs = true has no effect on this run (eager steps): the cpu backend cannot capture graphs") != 1 {
		t.Errorf("no explanation logged: %v", logsWith(evs, "cuda_graphs"))
	}
	withRecorder(t)
	evs, err = collect(t, tinySpec(t, "cuda_graphs = true\n[grid]\nplugin = [\"gemini\", \"torch_ddp\"]\ngpus = [1, 2]\n"), RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for why, want := range map[string]int{"gemini's hooks move chunks": 2, "the collectives of 2 ranks": 1} {
		if countLogs(evs, why) != want {
			t.Errorf("want %d %q warnings: %v", want, why, logsWith(evs, "cuda_graphs"))
		}
	}
	if n := countLogs(evs, "replayed from"); n != 1 {
		t.Errorf("%d runs replayed graphs, want 1 (torch_ddp on one rank)", n)
	}
}

func logsWith(evs []Event, sub string) []string {
	var out []string
	for _, e := range evs {
		if l, ok := e.(Log); ok && strings.Contains(l.Text, sub) {
			out = append(out, l.Text)
		}
	}
	return out
}

func countLogs(evs []Event, sub string) int { return len(logsWith(evs, sub)) }

// anyCapturesAbove reports whether a "N steps replayed from C captures"
// line has C > n.
func anyCapturesAbove(lines []string, n int) bool {
	for _, l := range lines {
		var replays, captures int
		i := strings.Index(l, ": ")
		if _, err := fmt.Sscanf(l[i+2:], "%d steps replayed from %d captures", &replays, &captures); err == nil && captures > n {
			return true
		}
	}
	return false
}

// syncingBackend reads a convolution's input back to the host, as an op
// that waits for the device would: fine eagerly, refused in a capture.
type syncingBackend struct{ *graphtest.Recorder }

func (s syncingBackend) Conv2dForward(y, x, w *kernels.Tensor, p kernels.ConvParams) {
	s.Download(x, make([]float32, x.Len()))
	s.Recorder.Conv2dForward(y, x, w, p)
}

func TestCUDAGraphsHostSyncFailsTheRun(t *testing.T) {
	trainWrap = func(be kernels.Backend) kernels.Backend { return syncingBackend{graphtest.New(be)} }
	t.Cleanup(func() { trainWrap = nil })
	s := tinySpec(t, "cuda_graphs = true\n")
	evs, err := collect(t, s, RunOptions{}, nil)
	if err == nil {
		t.Fatal("a host read inside the captured step went unnoticed")
	}
	for _, want := range []string{"graph capture of the train step failed", "Download cannot run inside a graph capture",
		"cuda_graphs = true in " + s.File} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := len(stepLosses(evs)); n != 2 {
		t.Errorf("%d steps before the failure, want the 2 eager warm-up steps", n)
	}
}
