package engine

import (
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

// TestOwnedSpansCoverParameters checks the ranges Adam updates: over all
// ranks, every parameter element exactly once and no padding, for DDP and
// both ZeRO stages, including layouts where a rank's block of the last
// bucket holds only padding.
func TestOwnedSpansCoverParameters(t *testing.T) {
	be := cpu.New()
	var params []*model.Param
	for _, n := range []int{7, 30, 1, 12} { // 50 elements
		params = append(params, &model.Param{W: be.New(kernels.CatParams, kernels.F32, n)})
	}
	for _, c := range []struct{ world, bucket int }{{1, 0}, {1, 16}, {2, 16}, {3, 20}, {4, 48}, {4, 7}, {8, 50}} {
		for _, plugin := range []struct {
			name  string
			p     string
			stage int
		}{{"ddp", TorchDDP, 0}, {"zero1", LowLevelZero, 1}, {"zero2", LowLevelZero, 2}} {
			if plugin.p == TorchDDP && c.world > 1 {
				continue // DDP ranks each update everything: world 1 says it all
			}
			seen := make([]int, 50)
			for r := 0; r < c.world; r++ {
				e := &Engine{lay: newLayout(params, c.world, r, c.bucket), sharded: plugin.p == LowLevelZero,
					cfg: EngineConfig{Plugin: plugin.p, ZeroStage: plugin.stage}}
				l := e.lay
				stateLen := l.padded()
				if e.sharded {
					stateLen = l.shardLen()
				}
				for _, s := range e.ownedSpans() {
					if s.n <= 0 || s.state < 0 || s.state+s.n > stateLen {
						t.Fatalf("%s world %d bucket %d rank %d: span %+v outside the state (%d)", plugin.name, c.world, c.bucket, r, s, stateLen)
					}
					// The span's flat offset: where its block sits in the layout.
					flat := s.grad
					if e.zero2() {
						flat = l.owned(s.state / l.block)
					}
					for i := flat; i < flat+s.n; i++ {
						if i >= len(seen) {
							t.Fatalf("%s world %d bucket %d rank %d: span %+v reaches padding (flat %d)", plugin.name, c.world, c.bucket, r, s, i)
						}
						seen[i]++
					}
				}
			}
			for i, k := range seen {
				if k != 1 {
					t.Fatalf("%s world %d bucket %d: element %d updated %d times", plugin.name, c.world, c.bucket, i, k)
				}
			}
		}
	}
}
