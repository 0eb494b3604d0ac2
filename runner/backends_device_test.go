package runner

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"resnetlab/kernels/cuda"
)

// The cross-backend check: the full-width ResNet-18 trains 20 steps
// of the recipe (synthetic data, batch 100) on the CPU backend and on the
// GPU from the same start, and the losses stay close. Exact fp32 on the GPU
// (RESNETLAB_TF32=0) differs from the CPU only in summation order, fp16 in
// where the 11-bit roundings fall inside the sums. Adam divides each
// gradient by its own magnitude, so a rounding difference in a tiny
// gradient becomes a whole lr-sized step of the other sign: the two runs
// drift apart step by step (measured on the H200: 5e-3 at step 4, up to
// 0.1 later, in fp32 as in fp16). Hence two bounds: the first steps, before
// that drift, within the rounding tolerance (fp32 1e-3, fp16 2e-2); all 20
// within 0.15 of each other and the mean of the last 10 within 5% (the
// curves track). As a control, the log gives the same drift between the
// fp32 GPU run with TF32 convolutions and the exact one. Runs only where a GPU is
// (scripts/device_check.sh, from a `go test -c` binary).
func TestTwentyStepsCPUvsCUDA(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA GPU: %v", err)
	}
	const early, band, meanTol = 3, 0.15, 0.05
	for _, c := range []struct {
		plugin, precision string
		tol               float64
	}{{"torch_ddp", "fp32", 1e-3}, {"torch_ddp", "fp16", 2e-2}} {
		t.Setenv("RESNETLAB_TF32", "0")
		cpu := twentyStepLosses(t, "cpu", c.plugin, c.precision)
		gpu := twentyStepLosses(t, "cuda", c.plugin, c.precision)
		for i, d := range relGaps(cpu, gpu) {
			lim := band
			if i < early {
				lim = c.tol
			}
			if d > lim {
				t.Errorf("%s %s step %d: loss %.6f on the CPU, %.6f on the GPU (relative %.2g > %.2g)",
					c.plugin, c.precision, i+1, cpu[i], gpu[i], d, lim)
			}
		}
		if mc, mg := mean(cpu[10:]), mean(gpu[10:]); math.Abs(mc-mg)/mc > meanTol {
			t.Errorf("%s %s: mean loss of steps 11-20 %.4f on the CPU, %.4f on the GPU (more than %.0f%% apart)",
				c.plugin, c.precision, mc, mg, 100*meanTol)
		}
		t.Logf("%s %s: 20 steps, loss %.4f -> %.4f (CPU) / %.4f -> %.4f (GPU); worst relative gap %.2g "+
			"(first %d steps %.2g)", c.plugin, c.precision, cpu[0], cpu[19], gpu[0], gpu[19],
			slices.Max(relGaps(cpu, gpu)), early, slices.Max(relGaps(cpu[:early], gpu[:early])))
		if c.precision == "fp32" { // fp16 convolutions do not use TF32
			t.Setenv("RESNETLAB_TF32", "1")
			tf32 := twentyStepLosses(t, "cuda", c.plugin, c.precision)
			t.Logf("control: the GPU with TF32 convolutions vs exact fp32, worst relative gap %.2g",
				slices.Max(relGaps(gpu, tf32)))
		}
	}
}

// relGaps returns |a-b| / max(1, |a|) element by element.
func relGaps(a, b []float64) []float64 {
	d := make([]float64, len(a))
	for i := range a {
		d[i] = math.Abs(a[i]-b[i]) / math.Max(1, math.Abs(a[i]))
	}
	return d
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
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
