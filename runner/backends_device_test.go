package runner

import (
	"fmt"
	"math"
	"testing"

	"resnetlab/kernels/cuda"
)

// The cross-backend check: the full-width ResNet-18 trains 20 steps
// of the recipe (synthetic data, batch 100) on the CPU backend and on the
// GPU from the same start, and the losses stay close at every step. Exact
// fp32 on the GPU (RESNETLAB_TF32=0) differs from the CPU only in summation
// order: 1e-3 relative. fp16 rounds activations to 11 bits on both backends
// but at different points of the sums: 2e-2. Runs only where a GPU is
// (scripts/device_run.sh stage "backends", from a `go test -c` binary).
func TestTwentyStepsCPUvsCUDA(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA GPU: %v", err)
	}
	t.Setenv("RESNETLAB_TF32", "0")
	for _, c := range []struct {
		plugin, precision string
		tol               float64
	}{{"torch_ddp", "fp32", 1e-3}, {"torch_ddp", "fp16", 2e-2}} {
		cpu := twentyStepLosses(t, "cpu", c.plugin, c.precision)
		gpu := twentyStepLosses(t, "cuda", c.plugin, c.precision)
		worst := 0.0
		for i := range cpu {
			d := math.Abs(cpu[i]-gpu[i]) / math.Max(1, math.Abs(cpu[i]))
			worst = math.Max(worst, d)
			if d > c.tol {
				t.Errorf("%s %s step %d: loss %.6f on the CPU, %.6f on the GPU (relative %.2g > %.0g)",
					c.plugin, c.precision, i+1, cpu[i], gpu[i], d, c.tol)
			}
		}
		t.Logf("%s %s: 20 steps, loss %.4f -> %.4f (CPU) / %.4f -> %.4f (GPU), worst relative gap %.2g",
			c.plugin, c.precision, cpu[0], cpu[19], gpu[0], gpu[19], worst)
	}
}

// twentyStepLosses trains one epoch of 20 steps and returns each step's loss.
func twentyStepLosses(t *testing.T, device, plugin, precision string) []float64 {
	t.Helper()
	s := tinySpec(t, fmt.Sprintf("[[run]]\nplugin = %q\nprecision = %q\n", plugin, precision))
	s.Device, s.Width, s.BatchSize, s.Epochs, s.Interval = device, 64, 100, 1, 0
	s.Synthetic.Train, s.Synthetic.Test = 2000, 100
	evs, err := collect(t, s, RunOptions{}, nil)
	if err != nil {
		t.Fatalf("%s: %v", device, err)
	}
	var losses []float64
	for _, e := range evs {
		if st, ok := e.(StepDone); ok {
			losses = append(losses, st.Loss)
		}
	}
	if len(losses) != 20 {
		t.Fatalf("%s: %d steps, want 20", device, len(losses))
	}
	return losses
}
