package engine

import (
	"testing"

	"resnetlab/comm"
	"resnetlab/kernels"

	"resnetlab/internal/testutil"
)

// The engines over DeviceComm on real GPU ranks (skipped without a GPU).

// TestDeviceCommCUDAEngines: DDP fp16 and ZeRO-2 with 2 ranks on GPU 0
// over DeviceComm give the same bits as over StagedComm (with 2 ranks both
// reduce to (x0 + x1) * 0.5 in fp32; the kernels are the same).
func TestDeviceCommCUDAEngines(t *testing.T) {
	testutil.NeedGPU(t)
	staged := func(be kernels.Backend, c comm.Communicator) (comm.DeviceCommunicator, error) {
		return comm.NewStagedComm(be, c), nil
	}
	device := testComms[1].make
	scaler := ScalerConfig{InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1000, Hysteresis: 2}
	for _, cfg := range []EngineConfig{
		{Plugin: TorchDDP, Precision: kernels.F16, Scaler: scaler, BucketElems: 7000},
		{Plugin: LowLevelZero, ZeroStage: 2, Precision: kernels.F16, Scaler: scaler, BucketElems: 7000},
	} {
		tc := trainCfg{world: 2, batch: 20, steps: 3, lr: 2e-3, eng: cfg, open: testutil.OnDevices(0), comm: staged}
		want, _ := train(t, tc)
		tc.comm = device
		got, _ := train(t, tc)
		for r := range got {
			if d, where := maxDiff(want[r], got[r]); d != 0 {
				t.Errorf("%s stage %d rank %d: DeviceComm differs from StagedComm by %g at %s", cfg.Plugin, cfg.ZeroStage, r, d, where)
			}
		}
	}
}
