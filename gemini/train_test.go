package gemini

import (
	"testing"

	"resnetlab/engine"
	"resnetlab/kernels"
)

func TestGeminiMatchesDDPAndZeRO(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
		for _, world := range []int{1, 2} {
			spec := runSpec{world: world, batch: 8, steps: 3, lr: 2e-3,
				gem: Config{Precision: dt, Scaler: testScaler, ShardParamFrac: 1}}
			gem := runGemini(t, spec)
			ddp := runEngine(t, spec, engine.EngineConfig{Plugin: engine.TorchDDP, Precision: dt, Scaler: testScaler})
			for r := range gem {
				if d := stateDiff(ddp[0], gem[r].state); d != "" {
					t.Errorf("%s world %d rank %d: Gemini differs from DDP: %s", dt, world, r, d)
				}
			}
			other := spec
			other.lr = 1e-3
			if d := stateDiff(runEngine(t, other, engine.EngineConfig{Plugin: engine.TorchDDP, Precision: dt, Scaler: testScaler})[0], gem[0].state); d == "" {
				t.Fatalf("%s world %d: a different learning rate gives the same state: the comparison has no power", dt, world)
			}
			if gem[0].state.Step != 3 {
				t.Fatalf("%s world %d: %d Adam steps, want 3", dt, world, gem[0].state.Step)
			}
			if world == 2 {
				zero := runEngine(t, spec, engine.EngineConfig{Plugin: engine.LowLevelZero, ZeroStage: 2, Precision: dt, Scaler: testScaler})
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

// Replicated ("kept gathered") chunks all-reduce like DDP; a mix of
// replicated and sharded chunks still gives DDP's numbers.
func TestPartlyShardedMatchesDDP(t *testing.T) {
	spec := runSpec{world: 2, batch: 4, steps: 2, lr: 2e-3,
		gem: Config{Precision: kernels.F16, Scaler: testScaler, ShardParamFrac: 0.5, ChunkElems: 36864}}
	gem := runGemini(t, spec)
	ddp := runEngine(t, spec, engine.EngineConfig{Plugin: engine.TorchDDP, Precision: kernels.F16, Scaler: testScaler})
	sharded, kept := 0, 0
	for _, c := range gem[0].chunks {
		if c.Sharded {
			sharded++
		} else {
			kept++
		}
	}
	if sharded == 0 || kept == 0 {
		t.Fatalf("%d sharded and %d replicated chunks: want both", sharded, kept)
	}
	for r := range gem {
		if d := stateDiff(ddp[0], gem[r].state); d != "" {
			t.Errorf("rank %d differs from DDP: %s", r, d)
		}
	}
}

// Static placement homes the first chunks (by bytes) in host memory: their
// parameters return there after each use and their Adam runs on the host.
func TestStaticOffloadPlacement(t *testing.T) {
	spec := runSpec{world: 1, batch: 2, steps: 2, lr: 2e-3,
		gem: Config{Precision: kernels.F16, Scaler: testScaler, ChunkElems: 36864, OffloadParamFrac: 0.5, OffloadOptimFrac: 0.25}}
	got := runGemini(t, spec)[0]
	spec.gem.OffloadParamFrac, spec.gem.OffloadOptimFrac = 0, 0
	base := runGemini(t, spec)[0]
	if d := stateDiff(base.state, got.state); d != "" {
		t.Fatalf("offloading changed the result: %s", d)
	}
	var total, hostParams, hostOptim int64
	for _, c := range got.chunks {
		total += c.Bytes
	}
	for i, c := range got.chunks {
		if c.Payload == Host {
			hostParams += c.Bytes
			if i > 0 && got.chunks[i-1].Payload != Host {
				t.Errorf("chunk %d is offloaded but chunk %d before it is not: want the first chunks", i, i-1)
			}
		}
		if c.Optim == Host {
			hostOptim += c.Bytes
		}
	}
	// Offloading stops at the first chunk that reaches the fraction.
	if hostParams < total/2 || hostParams > total/2+int64(2*36864) {
		t.Errorf("%d of %d chunk bytes homed on the host, want just over half", hostParams, total)
	}
	if hostOptim < total/4 || hostOptim > total/4+int64(2*36864) {
		t.Errorf("%d of %d optimizer chunk bytes on the host, want just over a quarter", hostOptim, total)
	}
	if got.stats.HostAdam == 0 || got.stats.DeviceAdam == 0 || got.stats.Moves == 0 {
		t.Errorf("stats %+v: want Adam on both sides and moves", got.stats)
	}
}

// Gemini's chunk collectives (broadcast of the initial chunks, all-gather
// of shards, reduce-scatter and all-reduce of gradients, in place on
// views) over comm.DeviceComm give the host comm's bits with 2 ranks.
func TestGeminiOverDeviceComm(t *testing.T) {
	for _, frac := range []float64{1, 0.5} {
		spec := runSpec{world: 2, batch: 8, steps: 3, lr: 2e-3,
			gem: Config{Precision: kernels.F16, Scaler: testScaler, ShardParamFrac: frac}}
		host := runGemini(t, spec)
		spec.deviceComm = true
		dev := runGemini(t, spec)
		for r := range dev {
			if d := stateDiff(host[r].state, dev[r].state); d != "" {
				t.Errorf("shard_param_frac %g rank %d: DeviceComm differs from the host comm: %s", frac, r, d)
			}
		}
		if dev[0].stats.Gathers == 0 || dev[0].stats.Reductions == 0 {
			t.Errorf("shard_param_frac %g: %d gathers, %d reductions: no chunk collective ran", frac, dev[0].stats.Gathers, dev[0].stats.Reductions)
		}
	}
}
