package engine

import (
	"math"
	"testing"

	"resnetlab/comm"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

func TestLossScalerSchedule(t *testing.T) {
	s := NewLossScaler(ScalerConfig{InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, Hysteresis: 2, MinScale: 1})
	steps := []struct {
		overflow bool
		want     float64
	}{
		{false, 32}, {false, 32}, {false, 64}, // grows after 3 clean steps
		{true, 64}, {true, 32}, // backs off after 2 overflows (hysteresis)
		{true, 32}, {false, 32}, {true, 16}, // the count survives a clean step until growth
	}
	for i, st := range steps {
		s.Update(st.overflow)
		if s.Scale != st.want {
			t.Fatalf("after update %d (overflow=%v): scale %g, want %g", i, st.overflow, s.Scale, st.want)
		}
	}
	if s.SkipCount != 4 {
		t.Fatalf("skipped %d steps, want 4", s.SkipCount)
	}
	floor := NewLossScaler(ScalerConfig{InitialScale: 1, BackoffFactor: 0.5, GrowthInterval: 10, MinScale: 1})
	floor.Update(true)
	if floor.Scale != 1 {
		t.Fatalf("scale fell below MinScale: %g", floor.Scale)
	}
}

// An overflow injected into one rank's gradients (an inf in its input
// batch) must skip the step on every rank, leave the weights untouched and
// halve the scale (torch GradScaler semantics, hysteresis 1).
func TestEngineSkipsStepOnInf(t *testing.T) {
	cfg := EngineConfig{Plugin: LowLevelZero, ZeroStage: 2, Precision: kernels.F16, BucketElems: 9000,
		Scaler: ScalerConfig{InitialScale: 1024, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 100, Hysteresis: 1}}
	err := comm.Launch(2, func(c *comm.Coordinator) error {
		be := cpu.New()
		m := model.NewResNet18(be, model.Config{Width: testWidth, InChannels: 3, NumClasses: 10, DType: kernels.F16, Seed: 5})
		e, err := NewEngine(be, comm.NewHostTensorComm(c.Comm()), m, cfg)
		if err != nil {
			return err
		}
		b := batchOf(be, kernels.F16, 8, 0, c.Rank(), 2)
		before, _ := e.State()
		if c.Rank() == 1 {
			x := make([]float32, b.X.Len())
			be.Download(b.X, x)
			x[17] = float32(math.Inf(1))
			be.Upload(b.X, x)
		}
		st, err := e.Step(b.X, b.Labels, 1e-3)
		if err != nil {
			return err
		}
		if !st.Skipped || e.Scaler().Scale != 512 || e.Steps() != 0 {
			t.Errorf("rank %d: skipped=%v scale=%g steps=%d, want skipped, 512, 0", c.Rank(), st.Skipped, e.Scaler().Scale, e.Steps())
		}
		after, _ := e.State()
		if d, where := paramDiff(before, after); d != 0 {
			t.Errorf("rank %d: weights changed by %g at %s on a skipped step", c.Rank(), d, where)
		}
		// A clean batch afterwards trains normally.
		clean := batchOf(be, kernels.F16, 8, 1, c.Rank(), 2)
		if st, err = e.Step(clean.X, clean.Labels, 1e-3); err != nil || st.Skipped {
			t.Errorf("rank %d: clean step skipped=%v err=%v", c.Rank(), st.Skipped, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// State taken under ZeRO with 2 ranks resumes under ZeRO with 3 ranks and
// under DDP with 1: the gathered state is world-size independent.
func TestStateAcrossWorldSizes(t *testing.T) {
	z := EngineConfig{Plugin: LowLevelZero, ZeroStage: 1, Precision: kernels.F16, BucketElems: 6000,
		Scaler: ScalerConfig{InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1000}}
	saved, _ := train(t, trainCfg{world: 2, batch: 8, steps: 2, lr: 1e-3, eng: z})
	for _, world := range []int{3, 1} {
		cfg := z
		if world == 1 {
			cfg.Plugin = TorchDDP
		}
		err := comm.Launch(world, func(c *comm.Coordinator) error {
			be := cpu.New()
			m := model.NewResNet18(be, model.Config{Width: testWidth, InChannels: 3, NumClasses: 10, DType: kernels.F16, Seed: 99})
			e, err := NewEngine(be, comm.NewHostTensorComm(c.Comm()), m, cfg)
			if err != nil {
				return err
			}
			if err := e.LoadState(saved[0]); err != nil {
				return err
			}
			got, err := e.State()
			if err != nil {
				return err
			}
			if d, where := maxDiff(saved[0], got); d != 0 || got.Step != 2 {
				t.Errorf("world %d rank %d: state differs by %g at %s (step %d)", world, c.Rank(), d, where, got.Step)
			}
			for i := range got.ExpAvg {
				for j := range got.ExpAvg[i] {
					if got.ExpAvg[i][j] != saved[0].ExpAvg[i][j] || got.ExpAvgSq[i][j] != saved[0].ExpAvgSq[i][j] {
						t.Fatalf("world %d: moment %d[%d] not restored", world, i, j)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
