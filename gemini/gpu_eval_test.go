//go:build gpu

package gemini

import (
	"errors"
	"fmt"
	"testing"

	"resnetlab/comm"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/kernels/cuda"
	"resnetlab/model"
)

// TestGPUEvaluationKeepsTheBudget trains ResNet-18 (batch 100, fp16, auto
// placement) a few steps under a quarter of its unbudgeted peak, then
// evaluates batches as the runner does (the model's Forward in eval mode,
// between steps): the device peak of the evaluation stays within the
// budget too. On failure it logs, per operator, the device bytes in use,
// the chunk bytes and the peak, up to the first operator over the budget.
func TestGPUEvaluationKeepsTheBudget(t *testing.T) {
	dev := gpuDevice(t)
	base := gpuConfig(Auto)
	free, err := evalRun(t, dev, base, false)
	if err != nil {
		t.Fatal(err)
	}
	c := base
	c.DeviceBudget = free / 4
	peak, err := evalRun(t, dev, c, true)
	var be *BudgetError
	if errors.As(err, &be) {
		t.Logf("1/4 = %d B does not fit the training step here (%v); at the step's need instead", c.DeviceBudget, err)
		c.DeviceBudget = be.Peak + be.Peak/16
		peak, err = evalRun(t, dev, c, true)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unbudgeted peak %d B; budget %d B: evaluation peak %d B", free, c.DeviceBudget, peak)
}

// evalRun trains 4 steps, then evaluates 3 batches with the hooks watched,
// and returns the device peak over both.
func evalRun(t *testing.T, dev *cuda.Backend, cfg Config, watch bool) (int64, error) {
	m := model.NewResNet18(dev, model.Config{Width: 64, InChannels: 3, NumClasses: 10, DType: kernels.F16, Seed: 5})
	defer m.Free()
	g, err := New(dev, cpu.New(), comm.NewHostTensorComm(comm.NewGroup(1).Comm(0)), m, cfg)
	if err != nil {
		return 0, err
	}
	defer g.Free()
	x, y := batchOf(dev, kernels.F16, 100, 0, 0, 1)
	defer dev.Free(x)
	defer dev.Free(y)
	var peak int64
	for range 4 {
		if _, err := g.Step(x, y, 1e-3); err != nil {
			return 0, err
		}
		peak = max(peak, dev.MemStats().TotalPeak)
	}
	dev.ResetPeak()
	w := &evalWatch{g: g, dev: dev, budget: cfg.DeviceBudget}
	if watch {
		m.SetHooks(w)
	}
	for range 3 {
		m.Forward(x, false) // the output is the model's, freed with it
	}
	m.SetHooks(g)
	ev := dev.MemStats().TotalPeak
	if watch && cfg.DeviceBudget > 0 && ev > cfg.DeviceBudget {
		for _, l := range w.lines {
			t.Log(l)
		}
		t.Errorf("budget %d B: the evaluation peaked at %d B, %d B over", cfg.DeviceBudget, ev, ev-cfg.DeviceBudget)
	}
	return max(peak, ev), nil
}

// evalWatch forwards the hooks to Gemini and notes the device bytes after
// each, until the first operator over the budget.
type evalWatch struct {
	g      *Gemini
	dev    *cuda.Backend
	budget int64
	lines  []string
	over   bool
}

func (w *evalWatch) note(when string, m model.Module) {
	if w.over {
		return
	}
	ms := w.dev.MemStats()
	w.over = ms.TotalPeak > w.budget
	w.lines = append(w.lines, fmt.Sprintf("%-6s %-22s in use %9d B, chunks %9d B, peak %9d B, freeing %d B", when, m.Name(), ms.Total(), w.g.managedDev, ms.TotalPeak, w.g.freeing))
}

func (w *evalWatch) PreForward(m model.Module) {
	w.note("before", m)
	w.g.PreForward(m)
	w.note("pre", m)
}

func (w *evalWatch) PostForward(m model.Module) {
	w.g.PostForward(m)
	w.note("post", m)
}

func (w *evalWatch) PreBackward(m model.Module)  { w.g.PreBackward(m) }
func (w *evalWatch) PostBackward(m model.Module) { w.g.PostBackward(m) }
