package gemini

import (
	"fmt"
	"testing"

	"resnetlab/comm"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

// BenchmarkGemini times one training step (after warm-up) of a width-16
// ResNet-18, batch 4, on one CPU rank, unbudgeted and at 1/2 and 1/4 of the
// unbudgeted peak, for both placements (static offloads every optimizer
// chunk once budgeted, like ZeRO-Offload; auto uses the warm-up trace). It
// reports the device peak and the bytes moved per step.
func BenchmarkGemini(b *testing.B) {
	cfg := Config{Precision: kernels.F16, Scaler: testScaler, ShardParamFrac: 1, GPUMarginMemRatio: 0.8, ChunkElems: 4 * 36864}
	full := benchPeak(b, cfg)
	for _, frac := range []int64{0, 2, 4} {
		for _, placement := range []string{Static, Auto} {
			c := cfg
			c.Placement = placement
			name := "unlimited"
			if frac > 0 {
				c.DeviceBudget = full / frac
				name = fmt.Sprintf("1_%d", frac)
				if placement == Static {
					c.OffloadOptimFrac = 1
				}
			}
			b.Run(name+"/"+placement, func(b *testing.B) { benchSteps(b, c) })
		}
	}
}

type benchRank struct {
	g    *Gemini
	w    *watchBackend
	m    *model.ResNet
	x, y *kernels.Tensor
}

func newBenchRank(tb testing.TB, cfg Config) *benchRank {
	w := &watchBackend{Backend: cpu.New(), budget: cfg.DeviceBudget}
	m := model.NewResNet18(w, model.Config{Width: 16, InChannels: 3, NumClasses: 10, DType: cfg.Precision, Seed: 5})
	g, err := New(w, cpu.New(), comm.NewHostTensorComm(comm.NewGroup(1).Comm(0)), m, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	r := &benchRank{g: g, w: w, m: m}
	r.x, r.y = batchOf(w, cfg.Precision, 4, 0, 0, 1)
	w.arm()
	for range 2 { // warm-up and the first planned step
		r.step(tb)
	}
	return r
}

func (r *benchRank) step(tb testing.TB) {
	if _, err := r.g.Step(r.x, r.y, 1e-3); err != nil {
		tb.Fatal(err)
	}
}

func (r *benchRank) free() {
	r.g.Free()
	r.m.Free()
}

// benchPeak is the unbudgeted run's device peak.
func benchPeak(tb testing.TB, cfg Config) int64 {
	r := newBenchRank(tb, cfg)
	defer r.free()
	return r.w.Peak()
}

func benchSteps(b *testing.B, cfg Config) {
	r := newBenchRank(b, cfg)
	defer r.free()
	moved := r.g.Stats().BytesMoved
	b.ResetTimer()
	for range b.N {
		r.step(b)
	}
	b.StopTimer()
	if r.w.over > 0 {
		b.Fatalf("%d allocations over the budget", r.w.over)
	}
	b.ReportMetric(float64(r.w.Peak()), "peak-B")
	b.ReportMetric(float64(cfg.DeviceBudget), "budget-B")
	b.ReportMetric(float64(r.g.Stats().BytesMoved-moved)/float64(b.N), "moved-B/step")
}
