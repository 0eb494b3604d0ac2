package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"resnetlab/comm"
	"resnetlab/data"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/kernels/graphtest"
	"resnetlab/model"
)

// graphRun is one rank's training with fixed input tensors (as the runner
// has), eagerly on the CPU or with graphs on a graphtest.Recorder.
type graphRun struct {
	state  *State
	losses []float32
	scales []float64
	stats  GraphStats
}

func trainFixed(t *testing.T, cfg EngineConfig, steps int, graphs bool) graphRun {
	t.Helper()
	var run graphRun
	err := comm.Launch(1, func(c *comm.Coordinator) error {
		var be kernels.Backend = cpu.New()
		if graphs {
			be = graphtest.New(be)
			cfg.Graphs = true
		}
		m := model.NewResNet18(be, model.Config{Width: testWidth, InChannels: 3, NumClasses: 10, DType: cfg.Precision, Seed: 11})
		e, err := NewEngine(be, comm.NewHostTensorComm(c.Comm()), m, cfg)
		if err != nil {
			return err
		}
		defer e.Free()
		if err := fixedSteps(e, be, cfg.Precision, steps, &run); err != nil {
			return err
		}
		run.state, err = e.State()
		run.stats = e.GraphStats()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// fixedSteps trains steps batches uploaded into the same two tensors.
func fixedSteps(e *Engine, be kernels.Backend, dt kernels.DType, steps int, run *graphRun) error {
	const batch = 16
	ds := testData()
	l := data.NewLoader(ds, data.TrainOptions(batch, 3, 0, 1))
	xh, yh := make([]float32, batch*ds.ImageLen()), make([]float32, batch)
	x := be.New(kernels.CatData, dt, batch, ds.C, 32, 32)
	y := be.New(kernels.CatData, kernels.F32, batch)
	for s := 0; s < steps; s++ {
		l.Batch(0, s, xh, yh)
		be.Upload(x, xh)
		be.Upload(y, yh)
		st, err := e.Step(x, y, 2e-3)
		if err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		run.losses = append(run.losses, st.Loss)
		run.scales = append(run.scales, st.LossScale)
	}
	return nil
}

func TestGraphStepsMatchEager(t *testing.T) {
	// fp16 starts with a loss scale that overflows (skipped steps, backoff)
	// and grows every 3 good steps: each change forces a re-capture, and a
	// graph replayed with a stale scale would change the numbers.
	scaler := ScalerConfig{InitialScale: 1 << 22, GrowthFactor: 2, BackoffFactor: 0.25, GrowthInterval: 3, Hysteresis: 1}
	cases := []struct {
		name string
		cfg  EngineConfig
	}{
		{"ddp-fp32", EngineConfig{Plugin: TorchDDP, Precision: kernels.F32}},
		{"ddp-fp16", EngineConfig{Plugin: TorchDDP, Precision: kernels.F16, Scaler: scaler}},
		{"zero1-bf16", EngineConfig{Plugin: LowLevelZero, ZeroStage: 1, Precision: kernels.BF16, BucketElems: 7000}},
		{"zero2-fp16", EngineConfig{Plugin: LowLevelZero, ZeroStage: 2, Precision: kernels.F16, Scaler: scaler, BucketElems: 7000}},
	}
	const steps = 9
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eager := trainFixed(t, tc.cfg, steps, false)
			graph := trainFixed(t, tc.cfg, steps, true)
			for s := range eager.losses {
				if eager.losses[s] != graph.losses[s] || eager.scales[s] != graph.scales[s] {
					t.Fatalf("step %d: eager loss %v scale %v, graph loss %v scale %v",
						s, eager.losses[s], eager.scales[s], graph.losses[s], graph.scales[s])
				}
			}
			if d, where := maxDiff(eager.state, graph.state); d != 0 {
				t.Fatalf("graph run differs from eager by %g at %s", d, where)
			}
			if !sameCounters(eager.state, graph.state) {
				t.Fatal("num_batches_tracked differs: replays skipped the forward's bookkeeping")
			}
			if want := steps - DefaultGraphWarmup; graph.stats.Replays != want {
				t.Errorf("replays %d, want %d", graph.stats.Replays, want)
			}
			if want := scaleChanges(graph.scales[DefaultGraphWarmup:]) + 1; graph.stats.Captures != want {
				t.Errorf("captures %d, want %d (one per loss scale after warm-up, scales %v)", graph.stats.Captures, want, graph.scales)
			}
		})
	}
}

func scaleChanges(s []float64) int {
	n := 0
	for i := 1; i < len(s); i++ {
		if s[i] != s[i-1] {
			n++
		}
	}
	return n
}

func sameCounters(a, b *State) bool {
	for i, nt := range a.Model {
		if strings.HasSuffix(nt.Name, "num_batches_tracked") && nt.Int64[0] != b.Model[i].Int64[0] {
			return false
		}
	}
	return true
}

func TestGraphCaptureRefusesHostSync(t *testing.T) {
	rec := graphtest.New(cpu.New())
	tt := rec.New(kernels.CatData, kernels.F32, 4)
	s := &stepGraph{cap: rec}
	err := s.capture(func() error {
		rec.Fill(tt, 1)
		var h [4]float32
		rec.Download(tt, h[:]) // a host read inside the captured region
		return nil
	})
	if !errors.Is(err, ErrCapture) || !strings.Contains(err.Error(), "Download") {
		t.Fatalf("capture with a Download: err %v, want one naming Download", err)
	}
	if rec.Capturing() || s.g != nil {
		t.Fatal("a failed capture left the backend capturing or kept the graph")
	}
	rec.Fill(tt, 2) // the backend is usable again
}
