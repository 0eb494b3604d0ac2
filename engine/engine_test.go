package engine

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"resnetlab/comm"
	"resnetlab/data"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

// The engine tests train a width-4 ResNet-18 on synthetic images with CPU
// ranks, so every plugin's arithmetic runs exactly as in a real run.

const testWidth = 4

var testData = sync.OnceValue(func() *data.Dataset {
	train, _ := data.Synthetic(400, 10, 7)
	return train
})

// batchOf uploads batch step of epoch 0 of rank/world's shard.
func batchOf(be kernels.Backend, dt kernels.DType, batch, step, rank, world int) Batch {
	ds := testData()
	l := data.NewLoader(ds, data.TrainOptions(batch, 3, rank, world))
	x := make([]float32, batch*ds.ImageLen())
	y := make([]float32, batch)
	l.Batch(0, step, x, y)
	b := Batch{X: be.New(kernels.CatData, dt, batch, ds.C, 32, 32), Labels: be.New(kernels.CatData, kernels.F32, batch)}
	be.Upload(b.X, x)
	be.Upload(b.Labels, y)
	return b
}

type trainCfg struct {
	world, batch, steps int
	accum               int // micro-batches per step on each rank (taken from world*accum shards)
	lr                  float32
	eng                 EngineConfig
	setup               func(e *Engine, rank int)               // called after NewEngine, if set
	comm                commMaker                               // nil: HostTensorComm
	open                func(rank int) (kernels.Backend, error) // nil: a CPU backend
}

// commMaker makes a rank's tensor communicator; the engine tests run over
// each of testComms.
type commMaker func(be kernels.Backend, c comm.Communicator) (comm.DeviceCommunicator, error)

var testComms = []struct {
	name string
	make commMaker
}{
	{"host", func(_ kernels.Backend, c comm.Communicator) (comm.DeviceCommunicator, error) {
		return comm.NewHostTensorComm(c), nil
	}},
	{"device", func(be kernels.Backend, c comm.Communicator) (comm.DeviceCommunicator, error) {
		return comm.NewDeviceComm(be, c)
	}},
}

// train runs cfg on world ranks and returns every rank's final state and
// memory stats.
func train(t *testing.T, cfg trainCfg) ([]*State, []kernels.MemStats) {
	t.Helper()
	if cfg.accum == 0 {
		cfg.accum = 1
	}
	states := make([]*State, cfg.world)
	mems := make([]kernels.MemStats, cfg.world)
	err := comm.Launch(cfg.world, func(c *comm.Coordinator) error {
		var be kernels.Backend = cpu.New()
		if cfg.open != nil {
			var err error
			if be, err = cfg.open(c.Rank()); err != nil {
				return err
			}
			defer closeIfCloser(be)
		}
		mcfg := model.Config{Width: testWidth, InChannels: 3, NumClasses: 10, DType: cfg.eng.Precision, Seed: 11}
		m := model.NewResNet18(be, mcfg)
		mk := cfg.comm
		if mk == nil {
			mk = testComms[0].make
		}
		dc, err := mk(be, c.Comm())
		if err != nil {
			return err
		}
		e, err := NewEngine(be, dc, m, cfg.eng)
		if err != nil {
			return err
		}
		if cfg.setup != nil {
			cfg.setup(e, c.Rank())
		}
		shards := cfg.world * cfg.accum
		for s := 0; s < cfg.steps; s++ {
			var micro []Batch
			for a := 0; a < cfg.accum; a++ {
				micro = append(micro, batchOf(be, cfg.eng.Precision, cfg.batch, s, c.Rank()*cfg.accum+a, shards))
			}
			if _, err := e.StepAccum(micro, cfg.lr); err != nil {
				return err
			}
		}
		st, err := e.State()
		states[c.Rank()] = st
		mems[c.Rank()] = be.MemStats()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return states, mems
}

// maxDiff is the largest |a-b| over all float entries of two state dicts,
// with the entry where it occurs.
func maxDiff(a, b *State) (float64, string) { return diff(a, b, func(string) bool { return true }) }

// paramDiff is maxDiff over the learnable parameters only.
func paramDiff(a, b *State) (float64, string) {
	return diff(a, b, func(name string) bool { return !strings.Contains(name, "running_") })
}

func diff(a, b *State, keep func(string) bool) (float64, string) {
	worst, where := 0.0, ""
	for i := range a.Model {
		if !keep(a.Model[i].Name) {
			continue
		}
		for j, x := range a.Model[i].Data {
			if d := math.Abs(float64(x - b.Model[i].Data[j])); d > worst || math.IsNaN(d) {
				worst, where = d, fmt.Sprintf("%s[%d]", a.Model[i].Name, j)
			}
		}
	}
	return worst, where
}

func TestDDPWorld2EqualsWorld1(t *testing.T) {
	// World 2 with batch 50 per rank must equal world 1 stepping over the
	// same 100 images. Batch norm normalises per rank (torch DDP without
	// SyncBatchNorm), so world 1 takes the two ranks' halves as two
	// micro-batches of one step; the rest is equal up to fp32 rounding.
	// Over every communicator; with 2 ranks they agree bit for bit.
	ddp := EngineConfig{Plugin: TorchDDP, Precision: kernels.F32, BucketElems: 5000}
	var first []*State
	for _, tc := range testComms {
		two, _ := train(t, trainCfg{world: 2, batch: 50, steps: 3, lr: 2e-3, eng: ddp, comm: tc.make})
		one, _ := train(t, trainCfg{world: 1, batch: 50, steps: 3, accum: 2, lr: 2e-3, eng: ddp, comm: tc.make})
		if d, where := maxDiff(two[0], two[1]); d != 0 {
			t.Fatalf("%s comm: ranks disagree after DDP steps: %g at %s", tc.name, d, where)
		}
		// Running statistics differ by design (world 1 updates them per
		// micro-batch); the parameters must not.
		if d, where := paramDiff(two[0], one[0]); d > 2e-5 {
			t.Fatalf("%s comm: world 2 x 50 differs from world 1 x (2 x 50) by %g at %s", tc.name, d, where)
		}
		if first == nil {
			first = two
		} else if d, where := maxDiff(first[0], two[0]); d != 0 {
			t.Fatalf("%s comm differs from %s comm by %g at %s", tc.name, testComms[0].name, d, where)
		}
	}
	// A different batch must change the result: the comparison can fail.
	other, _ := train(t, trainCfg{world: 1, batch: 100, steps: 3, lr: 2e-3, eng: ddp})
	if d, _ := paramDiff(first[0], other[0]); d < 1e-4 {
		t.Fatalf("world 1 x 100 (one BN batch) is indistinguishable (%g): the test has no power", d)
	}
}

func TestZeROMatchesDDPFP16(t *testing.T) {
	for _, tc := range testComms {
		for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
			zeroMatchesDDP(t, tc.name, tc.make, dt)
		}
	}
}

func zeroMatchesDDP(t *testing.T, commName string, mk commMaker, dt kernels.DType) {
	scaler := ScalerConfig{InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1000, Hysteresis: 2}
	base := EngineConfig{Plugin: TorchDDP, Precision: dt, Scaler: scaler, BucketElems: 7000}
	ddp, _ := train(t, trainCfg{world: 2, batch: 20, steps: 3, lr: 2e-3, eng: base, comm: mk})
	for _, stage := range []int{1, 2} {
		z := base
		z.Plugin, z.ZeroStage = LowLevelZero, stage
		zero, _ := train(t, trainCfg{world: 2, batch: 20, steps: 3, lr: 2e-3, eng: z, comm: mk})
		for r := range zero {
			if d, where := maxDiff(ddp[0], zero[r]); d != 0 {
				t.Errorf("%s comm: %s ZeRO-%d rank %d differs from DDP by %g at %s", commName, dt, stage, r, d, where)
			}
			for i := range ddp[0].ExpAvg {
				for j, x := range ddp[0].ExpAvg[i] {
					if zero[r].ExpAvg[i][j] != x || zero[r].ExpAvgSq[i][j] != ddp[0].ExpAvgSq[i][j] {
						t.Fatalf("%s comm: %s ZeRO-%d rank %d: Adam state of param %d differs at %d", commName, dt, stage, r, i, j)
					}
				}
			}
		}
	}
}

func TestZeROShardsOptimizerState(t *testing.T) {
	base := EngineConfig{Plugin: TorchDDP, Precision: kernels.F16, BucketElems: 20000,
		Scaler: ScalerConfig{InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1000}}
	_, ddpMem := train(t, trainCfg{world: 4, batch: 4, steps: 1, lr: 1e-3, eng: base})
	for _, stage := range []int{1, 2} {
		z := base
		z.Plugin, z.ZeroStage = LowLevelZero, stage
		_, zMem := train(t, trainCfg{world: 4, batch: 4, steps: 1, lr: 1e-3, eng: z})
		for r := range zMem {
			ddpOpt := ddpMem[r].InUse[kernels.CatOptState] + ddpMem[r].InUse[kernels.CatParams]
			zOpt := zMem[r].InUse[kernels.CatOptState] + zMem[r].InUse[kernels.CatParams]
			// fp16 model weights stay whole on every rank; the fp32 master
			// copy and both Adam moments are 1/4 (plus bucket padding).
			modelBytes := ddpMem[r].InUse[kernels.CatParams] - ddpMem[r].InUse[kernels.CatOptState]/2
			ratio := float64(zOpt-modelBytes) / float64(ddpOpt-modelBytes)
			if ratio < 0.24 || ratio > 0.27 {
				t.Errorf("ZeRO-%d rank %d: master+Adam bytes %d vs DDP %d: ratio %.3f, want ~1/4",
					stage, r, zOpt-modelBytes, ddpOpt-modelBytes, ratio)
			}
			if stage == 2 && zMem[r].InUse[kernels.CatGrads] >= ddpMem[r].InUse[kernels.CatGrads] {
				t.Errorf("ZeRO-2 rank %d keeps %d gradient bytes, DDP %d: want fewer",
					r, zMem[r].InUse[kernels.CatGrads], ddpMem[r].InUse[kernels.CatGrads])
			}
		}
	}
}
