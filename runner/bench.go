package runner

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"resnetlab/comm"
	"resnetlab/device"
	"resnetlab/engine"
	"resnetlab/gemini"
	"resnetlab/kernels"
	"resnetlab/model"
	"resnetlab/spec"
)

// BenchOptions selects what Bench times.
type BenchOptions struct {
	Device     string   // "auto", "cpu" or "cuda"
	Width      int      // 64 = ResNet-18
	Batch      int      // images per step (100 = the reference)
	Steps      int      // timed steps
	Warmup     int      // untimed steps first (allocation, PTX load)
	Precisions []string // e.g. fp32, fp16
	Plugin     string   // torch_ddp, low_level_zero or gemini
	// Budgets are Gemini device budgets to time, each after the unlimited
	// run (auto placement): a byte count, or a fraction of the unlimited
	// run's peak (Of > 0: Bytes = peak/Of).
	Budgets []BenchBudget
	// Profile > 0 times every backend op over that many more steps after
	// the timed ones (backends implementing kernels.Profiler only).
	Profile int
	// Graphs times every precision twice: eagerly, then with forward, loss
	// and backward replayed as a captured graph (EngineConfig.Graphs; needs
	// Warmup > engine.DefaultGraphWarmup so the capture is not timed).
	// Both results then carry the digest of the training state after the
	// timed steps, which must be equal. Profiles are taken eagerly only.
	Graphs bool
}

// BenchBudget is one Gemini device budget: Bytes, or 1/Of of the
// unlimited run's peak when Of > 0.
type BenchBudget struct {
	Bytes int64
	Of    int
}

// BenchResult is one timed configuration.
type BenchResult struct {
	Plugin, Precision, Device string
	StepMS                    float64 // mean wall time of one step, device synchronised
	ImagesPerSec              float64
	PeakBytes                 int64
	// Counters over the timed steps (Steps of them), on backends that count
	// (kernels.Profiler); zero otherwise.
	Counters kernels.Counters
	Steps    int
	// Profile holds the op records of ProfileSteps steps after the timed
	// ones and ProfileWallMS their wall time, device synchronised.
	Profile       []kernels.OpRecord
	ProfileSteps  int
	ProfileWallMS float64
	Budget        int64  // Gemini device budget (0: unlimited)
	Graphs        bool   // steps replayed from a graph
	StateSHA      string // with BenchOptions.Graphs: sha256 of the state after Warmup+Steps steps
}

// checkBenchFlags refuses, before any step is timed, flags that do not go
// together or that the device kind cannot serve: usage errors (FlagError).
func checkBenchFlags(o BenchOptions, kind string) error {
	timesOps := kind == "cuda" || benchWrap != nil // the CUDA backend (or a test's wrapper) captures and profiles
	switch {
	case o.Graphs && o.Warmup <= engine.DefaultGraphWarmup:
		return flagErrorf("--graphs needs --warmup > %d: the graph is captured after %d eager steps, and the capture should not be timed",
			engine.DefaultGraphWarmup, engine.DefaultGraphWarmup)
	case o.Graphs && !timesOps:
		return flagErrorf("--graphs needs a backend that captures graphs (cuda); %s does not", kind)
	case o.Profile > 0 && !timesOps:
		return flagErrorf("--profile needs a backend that times its ops (cuda); %s does not", kind)
	case len(o.Budgets) > 0 && (o.Plugin != spec.PluginGemini || o.Graphs):
		return flagErrorf("--budget times Gemini (--plugin gemini) eagerly, not %s%s", o.Plugin, map[bool]string{true: " with --graphs"}[o.Graphs])
	}
	return nil
}

// Bench times full training steps (forward, loss, backward, gradient
// handling and Adam) of one rank on a fixed random batch already on the
// device: the step alone, without the input pipeline (runs report that).
func Bench(ctx context.Context, o BenchOptions) ([]BenchResult, error) {
	plan, err := device.PlanFor(o.Device, 1, true)
	if err != nil {
		return nil, err
	}
	if err := checkBenchFlags(o, plan.Kind); err != nil {
		return nil, err
	}
	modes := []bool{false}
	if o.Graphs {
		modes = append(modes, true)
	}
	var out []BenchResult
	for _, p := range o.Precisions {
		for _, graphs := range modes {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			r, err := benchOne(plan, o, p, graphs, 0)
			if r.Steps > 0 {
				out = append(out, r) // timed, even if its profile failed
			}
			if err != nil {
				return out, fmt.Errorf("%s %s: %w", o.Plugin, p, err)
			}
			for _, b := range o.Budgets {
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
				bytes := b.Bytes
				if b.Of > 0 {
					bytes = r.PeakBytes / int64(b.Of)
				}
				rb, err := benchOne(plan, o, p, false, bytes)
				if rb.Steps > 0 {
					out = append(out, rb)
				}
				if err != nil {
					return out, fmt.Errorf("%s %s, budget %s: %w", o.Plugin, p, spec.FormatSize(bytes), err)
				}
			}
		}
	}
	return out, nil
}

// benchTrainer builds the trainer of one configuration: Gemini (auto
// placement, the given device budget) or the DDP/ZeRO engine.
func benchTrainer(be kernels.Backend, m *model.ResNet, o BenchOptions, dt kernels.DType, graphs bool, budget int64) (engine.Trainer, error) {
	sc := engine.ScalerConfig{InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1000, Hysteresis: 2}
	dc := comm.NewStagedComm(be, comm.NewGroup(1).Comm(0))
	if o.Plugin == spec.PluginGemini {
		return gemini.New(be, device.Host(), dc, m, gemini.Config{Precision: dt, Scaler: sc, Placement: gemini.Auto,
			DeviceBudget: budget, ShardParamFrac: 1, GPUMarginMemRatio: 0.8})
	}
	return engine.NewEngine(be, dc, m, engine.EngineConfig{Plugin: o.Plugin, Precision: dt, ZeroStage: 1, Scaler: sc, Graphs: graphs})
}

func benchOne(plan device.Plan, o BenchOptions, precision string, graphs bool, budget int64) (BenchResult, error) {
	dt, err := kernels.ParseDType(precision)
	if err != nil {
		return BenchResult{}, err
	}
	be, err := plan.Open(0, 1)
	if err != nil {
		return BenchResult{}, err
	}
	defer device.Close(be)
	if benchWrap != nil {
		be = benchWrap(be)
	}
	m := model.NewResNet18(be, model.Config{Width: o.Width, InChannels: 3, NumClasses: 10, DType: dt, Seed: 1})
	defer m.Free()
	e, err := benchTrainer(be, m, o, dt, graphs, budget)
	if err != nil {
		return BenchResult{}, err
	}
	defer e.Free()
	x, y := randomBatch(be, dt, o.Batch)
	defer be.Free(x)
	defer be.Free(y)
	for i := 0; i < o.Warmup; i++ {
		if _, err := e.Step(x, y, 1e-3); err != nil {
			return BenchResult{}, err
		}
	}
	if err := be.Sync(); err != nil {
		return BenchResult{}, err
	}
	be.ResetPeak()
	prof, _ := be.(kernels.Profiler)
	var c0 kernels.Counters
	if prof != nil {
		c0 = prof.Counters()
	}
	dt2, err := timeSteps(be, e, x, y, o.Steps)
	if err != nil {
		return BenchResult{}, err
	}
	r := BenchResult{Plugin: o.Plugin, Precision: precision, Device: be.Device(),
		StepMS: 1000 * dt2 / float64(o.Steps), ImagesPerSec: float64(o.Steps*o.Batch) / dt2,
		PeakBytes: be.MemStats().TotalPeak, Steps: o.Steps, Graphs: graphs, Budget: budget}
	if prof != nil {
		r.Counters = prof.Counters().Sub(c0)
	}
	if o.Graphs {
		if r.StateSHA, err = stateSHA(e); err != nil {
			return r, err
		}
	}
	if o.Profile > 0 && !graphs {
		if prof == nil {
			return r, fmt.Errorf("--profile needs a backend that times its ops (cuda); %s does not", be.Name())
		}
		prof.StartProfile()
		wall, err := timeSteps(be, e, x, y, o.Profile)
		recs, perr := prof.StopProfile()
		if err == nil {
			err = perr
		}
		r.Profile, r.ProfileSteps, r.ProfileWallMS = recs, o.Profile, 1000*wall
		if err != nil {
			return r, fmt.Errorf("profile: %w", err)
		}
	}
	return r, nil
}

// timeSteps runs n training steps and returns their wall time in seconds,
// with the device synchronised at the end.
func timeSteps(be kernels.Backend, e engine.Trainer, x, y *kernels.Tensor, n int) (float64, error) {
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if _, err := e.Step(x, y, 1e-3); err != nil {
			return 0, err
		}
	}
	if err := be.Sync(); err != nil {
		return 0, err
	}
	return time.Since(t0).Seconds(), nil
}

// stateSHA digests the engine's training state: weights, buffers, batch
// counters and Adam moments.
func stateSHA(e engine.Trainer) (string, error) {
	st, err := e.State()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, nt := range st.Model {
		_ = binary.Write(h, binary.LittleEndian, nt.Data)
		_ = binary.Write(h, binary.LittleEndian, nt.Int64)
	}
	for i := range st.ExpAvg {
		_ = binary.Write(h, binary.LittleEndian, st.ExpAvg[i])
		_ = binary.Write(h, binary.LittleEndian, st.ExpAvgSq[i])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// benchWrap, when set (tests), wraps the backend Bench opens.
var benchWrap func(kernels.Backend) kernels.Backend

// randomBatch is a fixed batch of uniform images and random labels.
func randomBatch(be kernels.Backend, dt kernels.DType, n int) (x, y *kernels.Tensor) {
	r := rand.New(rand.NewPCG(7, 8))
	xh := make([]float32, n*3*32*32)
	for i := range xh {
		xh[i] = r.Float32()
	}
	yh := make([]float32, n)
	for i := range yh {
		yh[i] = float32(r.IntN(10))
	}
	x = be.New(kernels.CatData, dt, n, 3, 32, 32)
	y = be.New(kernels.CatData, kernels.F32, n)
	be.Upload(x, xh)
	be.Upload(y, yh)
	return x, y
}
