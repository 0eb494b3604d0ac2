package memory

import (
	"testing"

	"resnetlab/kernels"
	"resnetlab/parallel"
)

func TestGeminiMatchesDDPAndZeRO(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
		for _, world := range []int{1, 2} {
			spec := runSpec{world: world, batch: 8, steps: 3, lr: 2e-3,
				gem: Config{Precision: dt, Scaler: testScaler, ShardParamFrac: 1}}
			gem := runGemini(t, spec)
			ddp := runEngine(t, spec, parallel.EngineConfig{Plugin: parallel.TorchDDP, Precision: dt, Scaler: testScaler})
			for r := range gem {
				if d := stateDiff(ddp[0], gem[r].state); d != "" {
					t.Errorf("%s world %d rank %d: Gemini differs from DDP: %s", dt, world, r, d)
				}
			}
			other := spec
			other.lr = 1e-3
			if d := stateDiff(runEngine(t, other, parallel.EngineConfig{Plugin: parallel.TorchDDP, Precision: dt, Scaler: testScaler})[0], gem[0].state); d == "" {
				t.Fatalf("%s world %d: a different learning rate gives the same state: the comparison has no power", dt, world)
			}
			if gem[0].state.Step != 3 {
				t.Fatalf("%s world %d: %d Adam steps, want 3", dt, world, gem[0].state.Step)
			}
			if world == 2 {
				zero := runEngine(t, spec, parallel.EngineConfig{Plugin: parallel.LowLevelZero, ZeroStage: 2, Precision: dt, Scaler: testScaler})
				if d := stateDiff(zero[1], gem[1].state); d != "" {
					t.Errorf("%s: Gemini differs from ZeRO-2: %s", dt, d)
				}
				if gem[0].stats.Gathers == 0 || gem[0].stats.Reductions == 0 {
					t.Errorf("%s world 2: %d gathers, %d reductions: chunks were not sharded", dt, gem[0].stats.Gathers, gem[0].stats.Reductions)
				}
			}
		}
	}
}
