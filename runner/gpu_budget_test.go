//go:build gpu

package runner

import (
	"fmt"
	"path/filepath"
	"testing"

	"resnetlab/kernels"
	"resnetlab/spec"
)

// A Gemini run on the GPU under a quarter and a half of its unbudgeted
// device peak keeps the budget for the whole run, not only inside the
// training steps that Gemini checks itself: the run's peak (the results'
// peak_device_bytes_per_rank) covers the evaluations, the checkpoint and
// the final model too. On failure the log shows the events around the
// first memory report over the budget, which says in which phase it was.
func TestGPUGeminiRunKeepsItsBudget(t *testing.T) {
	free := finished(t, mustCollect(t, gpuGeminiSpec(t, "")))[0]
	t.Logf("unbudgeted: peak %d B", free.PeakDeviceBytes[0])
	for _, frac := range []int64{4, 2} {
		budget := free.PeakDeviceBytes[0] / frac
		evs := mustCollect(t, gpuGeminiSpec(t, fmt.Sprintf("device_budget = %d\n", budget)))
		res := finished(t, evs)[0]
		t.Logf("1/%d: budget %d B, run peak %d B, final acc %.4f (unbudgeted %.4f)", frac, budget, res.PeakDeviceBytes[0],
			res.FinalTestAcc, free.FinalTestAcc)
		if res.PeakDeviceBytes[0] <= budget {
			continue
		}
		t.Errorf("1/%d: the run's device peak %d B is over its budget %d B by %d B", frac, res.PeakDeviceBytes[0], budget,
			res.PeakDeviceBytes[0]-budget)
		logAroundFirstExcess(t, evs, budget)
	}
}

// logAroundFirstExcess logs the events before the first MemoryUsage whose
// peak is over budget, back to the previous MemoryUsage.
func logAroundFirstExcess(t *testing.T, evs []Event, budget int64) {
	t.Helper()
	prev := 0
	for i, e := range evs {
		m, ok := e.(MemoryUsage)
		if !ok {
			continue
		}
		if m.DevicePeak <= budget {
			prev = i
			continue
		}
		for _, e := range evs[prev : i+1] {
			switch e := e.(type) {
			case MemoryUsage:
				t.Logf("  memory at epoch %d step %d: peak %d B, in use %d B", e.Epoch, e.Step, e.DevicePeak, kernels.MemStats{InUse: e.Device}.Total())
			case GeminiStep:
				t.Logf("  gemini step %d: step peak %d B", e.Step, e.PeakDevice)
			case StepDone:
				t.Logf("  step done: epoch %d step %d", e.Epoch, e.Step)
			case EpochDone:
				t.Logf("  epoch %d done (evaluated: acc %.4f)", e.Epoch, e.TestAcc)
			case CheckpointSaved, Log:
				t.Logf("  %T %+v", e, e)
			}
		}
		return
	}
}

// gpuGeminiSpec is the docs' 1-epoch budget run on synthetic data: full
// ResNet-18, batch 100, 3x32x32, gemini fp16 with auto placement, batches
// uploaded per step, one evaluation and a final checkpoint.
func gpuGeminiSpec(t *testing.T, budget string) *spec.Spec {
	t.Helper()
	dir := t.TempDir()
	src := fmt.Sprintf(`
name = "gq"
dataset = "synthetic"
in_channels = 3
epochs = 1
batch_size = 100
lr = 1e-3
device = "cuda"
device_batches = false
checkpoint = %q
results_dir = %q
interval = 0
[synthetic]
train = 2000
test = 1000
seed = 1
[[run]]
plugin = "gemini"
precision = "fp16"
[gemini]
placement = "auto"
%s`, filepath.Join(dir, "ckpt"), filepath.Join(dir, "results"), budget)
	s, err := spec.Parse(filepath.Join(dir, "gq.toml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
