package comm

import (
	"math/rand/v2"
	"sync"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
)

// TestStagedCommMatchesHostTensorComm runs every collective through the
// staged path and the host-tensor path on the CPU backend (where both are
// exact) and requires bit-identical results, for worlds 1..3 (world 1 takes
// the staged path's on-device shortcut) and fp16 tensors.
func TestStagedCommMatchesHostTensorComm(t *testing.T) {
	for world := 1; world <= 3; world++ {
		for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
			staged := runCollectives(t, world, dt, func(be kernels.Backend, c Communicator) DeviceCommunicator {
				return NewStagedComm(be, c)
			})
			host := runCollectives(t, world, dt, func(_ kernels.Backend, c Communicator) DeviceCommunicator {
				return NewHostTensorComm(c)
			})
			for r := range staged {
				for i := range staged[r] {
					if staged[r][i] != host[r][i] {
						t.Fatalf("world %d %s rank %d element %d: staged %v, host %v", world, dt, r, i, staged[r][i], host[r][i])
					}
				}
			}
		}
	}
}

// runCollectives does all-reduce (avg), reduce-scatter (sum), all-gather
// and broadcast from rank world-1 on seeded data, and returns each rank's
// outputs concatenated.
func runCollectives(t *testing.T, world int, dt kernels.DType, mk func(kernels.Backend, Communicator) DeviceCommunicator) [][]float32 {
	t.Helper()
	const n = 7 // per-rank block; odd on purpose
	g := NewGroup(world)
	out := make([][]float32, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			be := cpu.New(cpu.WithWorkers(1))
			c := mk(be, g.Comm(r))
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			vals := func(k int) []float32 {
				v := make([]float32, k)
				for i := range v {
					v[i] = rng.Float32()*2 - 1
				}
				return v
			}
			full := be.New(kernels.CatGrads, dt, world*n)
			be.Upload(full, vals(world*n))
			shard := be.New(kernels.CatGrads, dt, n)
			gathered := be.New(kernels.CatParams, dt, world*n)
			bc := be.New(kernels.CatParams, dt, 5)
			be.Upload(bc, vals(5))
			steps := []func() error{
				func() error { return c.AllReduce(full, Avg) },
				func() error { return c.ReduceScatter(shard, full, Sum) },
				func() error { return c.AllGather(gathered, shard) },
				func() error { return c.Broadcast(bc, world-1) },
			}
			for _, s := range steps {
				if err := s(); err != nil {
					errs[r] = err
					return
				}
			}
			for _, ts := range []*kernels.Tensor{full, shard, gathered, bc} {
				h := make([]float32, ts.Len())
				be.Download(ts, h)
				out[r] = append(out[r], h...)
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("world %d rank %d: %v", world, r, err)
		}
	}
	return out
}
