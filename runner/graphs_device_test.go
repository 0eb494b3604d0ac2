package runner

import (
	"testing"

	"resnetlab/kernels/cuda"
)

// TestCUDAGraphsOnGPU is TestCUDAGraphsMatchEager with real CUDA graphs:
// the same three runs (fp32, fp16 with loss-scale re-captures, ZeRO-2 fp16)
// at width 16 on the GPU, eager and with cuda_graphs = true, must end with
// the same model file and the same loss at every step. Runs only where a
// GPU is (scripts/device_check.sh, from a `go test -c` binary).
func TestCUDAGraphsOnGPU(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA GPU: %v", err)
	}
	var evs [2][]Event
	for i, on := range []bool{false, true} {
		s := graphSpec(t, on)
		s.Device, s.Width = "cuda", 16
		var err error
		if evs[i], err = collect(t, s, RunOptions{}, nil); err != nil {
			t.Fatalf("cuda_graphs = %v: %v", on, err)
		}
	}
	eager, graph := finished(t, evs[0]), finished(t, evs[1])
	for i := range eager {
		if eager[i].ModelSHA256 != graph[i].ModelSHA256 {
			t.Errorf("%s: model sha %.16s eager, %.16s with graphs", eager[i].Run, eager[i].ModelSHA256, graph[i].ModelSHA256)
		}
	}
	el, gl := stepLosses(evs[0]), stepLosses(evs[1])
	for i := range el {
		if el[i] != gl[i] {
			t.Fatalf("step event %d: loss %v eager, %v with graphs", i, el[i], gl[i])
		}
	}
	for _, l := range logsWith(evs[1], "cuda_graphs") {
		t.Log(l)
	}
	if n := countLogs(evs[1], "steps replayed from"); n != 3 {
		t.Errorf("%d runs replayed graphs, want 3", n)
	}
}

func stepLosses(evs []Event) []float64 {
	var out []float64
	for _, e := range evs {
		if st, ok := e.(StepDone); ok {
			out = append(out, st.Loss)
		}
	}
	return out
}
