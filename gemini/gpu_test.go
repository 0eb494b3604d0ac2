//go:build gpu

package gemini

// The GPU measurement of auto against static placement at equal device
// budgets (ColossalAI claims "dynamic placement beats a static offload split by up
// to 40%"). Built with -tags gpu and run on the device machine:
//
//	CGO_ENABLED=0 go test -c -tags gpu -o .dev/gemini.test ./gemini
//	.dev/gemini.test -test.run GPU -test.v

import (
	"fmt"
	"math"
	"resnetlab/comm"
	"resnetlab/engine"
	"resnetlab/kernels/cpu"
	"strings"
	"testing"
	"time"

	"resnetlab/kernels"
	"resnetlab/kernels/cuda"
	"resnetlab/model"
)

// TestGPUAutoVersusStatic trains 12 steps at 1/2 and 1/4 of the model
// data under each placement, logs the speed and checks that every budgeted
// run ends with the unbudgeted run's state bit for bit.
func TestGPUAutoVersusStatic(t *testing.T) {
	dev := gpuDevice(t)
	base := gpuConfig("")
	ref := gpuRun(t, dev, base, "unlimited", false)
	for _, f := range []float64{0.5, 0.25} {
		budget := ref.nonModel + int64(f*float64(ref.peak-ref.nonModel))
		for _, placement := range []string{Static, Auto} {
			c := base
			c.Placement, c.DeviceBudget = placement, budget
			if placement == Static {
				c.OffloadOptimFrac = 1 // ZeRO-Offload: Adam on the CPU
			}
			r := gpuRun(t, dev, c, placement, false)
			// Host and device Adam do the same IEEE operations, so a budget
			// (which only moves where a chunk's Adam runs) changes no bit.
			if d := stateDiff(ref.state, r.state); d != "" {
				t.Errorf("%s, model data %.2f: differs from the unbudgeted run: %s", placement, f, d)
			}
		}
	}
}

// gpuDevice opens GPU 0 for a test, closed when the test ends; the test
// is skipped where there is none.
func gpuDevice(t *testing.T) *cuda.Backend {
	t.Helper()
	dev, err := cuda.New(0)
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(dev.Close)
	return dev
}

// gpuConfig is the GPU tests' Gemini configuration of ResNet-18 fp16 with
// the given placement, unbudgeted.
func gpuConfig(placement string) Config {
	return Config{Precision: kernels.F16, Scaler: testScaler, ShardParamFrac: 1, GPUMarginMemRatio: 0.8, Placement: placement}
}

type gpuResult struct {
	peak, nonModel int64
	state          *engine.State
}

// TestGPUPrefetch runs auto placement at the budgets above with chunk moves
// synchronous (blocking Upload and Download, as without a copy stream),
// asynchronous on the copy stream, and asynchronous with prefetch: the
// weights must be bit-identical (moves only copy); the time per step, the
// prefetches and the stalls are logged.
func TestGPUPrefetch(t *testing.T) {
	dev := gpuDevice(t)
	base := gpuConfig(Auto)
	ref := gpuRun(t, dev, base, "unlimited", false)
	for _, f := range []float64{0.5, 0.25} {
		budget := ref.nonModel + int64(f*float64(ref.peak-ref.nonModel))
		var first *engine.State
		for _, v := range []struct {
			name string
			sync bool
			pf   int
		}{{"sync", true, 0}, {"async", false, 0}, {"prefetch", false, 4}} {
			c := base
			c.DeviceBudget, c.MaxPrefetch = budget, v.pf
			r := gpuRun(t, dev, c, v.name, v.sync)
			if first == nil {
				first = r.state
			} else if d, where := worstDiff(first, r.state); d != 0 {
				t.Errorf("model data %.2f: %s differs from sync moves by %g at %s", f, v.name, d, where)
			}
		}
	}
}

func gpuRun(t *testing.T, dev kernels.Backend, cfg Config, name string, sync bool) gpuResult {
	w := &watchBackend{Backend: dev, budget: cfg.DeviceBudget, sync: sync}
	m := model.NewResNet18(w, model.Config{Width: 64, InChannels: 3, NumClasses: 10, DType: kernels.F16, Seed: 5})
	g, err := New(w, cpu.New(), comm.NewHostTensorComm(comm.NewGroup(1).Comm(0)), m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	defer g.Free()
	const batch, steps = 100, 12
	xs, ys := make([]*kernels.Tensor, steps), make([]*kernels.Tensor, steps)
	for s := range steps {
		xs[s], ys[s] = batchOf(w, kernels.F16, batch, s%(len(testDataIdx())), 0, 1)
	}
	defer func() {
		for s := range steps {
			w.Free(xs[s])
			w.Free(ys[s])
		}
	}()
	w.arm()
	var start time.Time
	for s := range steps {
		if s == 2 {
			start = time.Now()
		}
		if _, err := g.Step(xs[s], ys[s], 1e-3); err != nil {
			t.Fatalf("%s: step %d: %v", name, s, err)
		}
	}
	dt := time.Since(start) / (steps - 2)
	st := g.Stats()
	t.Logf("%-9s budget %6.1f MiB: %7.2f ms/step, peak %6.1f MiB (non-model %6.1f MiB), Adam dev/host %d/%d chunks, %d moves %.1f MiB, %d prefetched, %d stalls, %d revived",
		name, mib(cfg.DeviceBudget), float64(dt.Microseconds())/1000, mib(w.Peak()), mib(st.NonModelPeak),
		st.DeviceAdam, st.HostAdam, st.Moves, mib(st.BytesMoved), st.Prefetches, st.Stalls, st.Revived)
	if w.over > 0 {
		t.Errorf("%s: %d allocations over the budget", name, w.over)
	}
	state, err := g.State()
	if err != nil {
		t.Fatal(err)
	}
	return gpuResult{peak: w.Peak(), nonModel: st.NonModelPeak, state: state}
}

func testDataIdx() []int { return make([]int, testData().N/100) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// TestGPUMatchesDDP compares one step of Gemini (device Adam, host Adam)
// and DDP on the GPU, and Gemini on the CPU backend.
func TestGPUMatchesDDP(t *testing.T) {
	dev := gpuDevice(t)
	base := Config{Precision: kernels.F16, Scaler: testScaler, ShardParamFrac: 1, Placement: Static}
	host := base
	host.OffloadOptimFrac = 1
	runs := map[string]*engine.State{
		"gpu-devadam":  diagGemini(t, dev, base),
		"gpu-hostadam": diagGemini(t, dev, host),
		"cpu":          diagGemini(t, cpu.New(), base),
		"gpu-ddp":      diagDDP(t, dev),
	}
	// On the GPU, Gemini with Adam on the device is DDP exactly; Adam on
	// the host differs from the CUDA kernel by float rounding only; the CPU
	// backend's convolutions round differently (logged).
	if d, where := worstDiff(runs["gpu-devadam"], runs["gpu-ddp"]); d != 0 {
		t.Errorf("Gemini (device Adam) differs from DDP on the GPU by %g at %s", d, where)
	}
	if d, where := worstDiff(runs["gpu-devadam"], runs["gpu-hostadam"]); d > 1e-6 {
		t.Errorf("host Adam differs from device Adam by %g at %s after one step", d, where)
	}
	d, where := worstDiff(runs["gpu-devadam"], runs["cpu"])
	t.Logf("GPU vs CPU backend after one step: max |param diff| %g at %s", d, where)
}

const diagSteps = 1

func diagGemini(t *testing.T, be kernels.Backend, cfg Config) *engine.State {
	m := model.NewResNet18(be, model.Config{Width: 64, InChannels: 3, NumClasses: 10, DType: kernels.F16, Seed: 5})
	g, err := New(be, cpu.New(), comm.NewHostTensorComm(comm.NewGroup(1).Comm(0)), m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	defer g.Free()
	for s := range diagSteps {
		x, y := batchOf(be, kernels.F16, 100, 0, 0, 1)
		st, err := g.Step(x, y, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		if st.Skipped {
			t.Fatalf("gemini %s step %d skipped", be.Name(), s)
		}
		be.Free(x)
		be.Free(y)
	}
	st, err := g.State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func diagDDP(t *testing.T, be kernels.Backend) *engine.State {
	m := model.NewResNet18(be, model.Config{Width: 64, InChannels: 3, NumClasses: 10, DType: kernels.F16, Seed: 5})
	e, err := engine.NewEngine(be, comm.NewStagedComm(be, comm.NewGroup(1).Comm(0)), m,
		engine.EngineConfig{Plugin: engine.TorchDDP, Precision: kernels.F16, Scaler: testScaler})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	defer e.Free()
	for s := range diagSteps {
		x, y := batchOf(be, kernels.F16, 100, 0, 0, 1)
		st, err := e.Step(x, y, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		if st.Skipped {
			t.Fatalf("ddp step %d skipped", s)
		}
	}
	st, err := e.State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func worstDiff(a, b *engine.State) (float64, string) {
	worst, where := 0.0, ""
	for i := range a.Model {
		if strings.Contains(a.Model[i].Name, "running_") {
			continue
		}
		for j, x := range a.Model[i].Data {
			if d := math.Abs(float64(x - b.Model[i].Data[j])); d > worst {
				worst, where = d, fmt.Sprintf("%s[%d] (%g vs %g)", a.Model[i].Name, j, x, b.Model[i].Data[j])
			}
		}
	}
	return worst, where
}
