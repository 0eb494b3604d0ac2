package comm

import (
	"fmt"
	"strings"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
)

// tensorRanks runs fn on world ranks, each with its own CPU backend.
func tensorRanks(t *testing.T, world int, fn func(r int, b kernels.Backend, c DeviceCommunicator) error) {
	t.Helper()
	onRanks(t, world, func(r int, c Communicator) error {
		return fn(r, cpu.New(cpu.WithWorkers(1)), NewHostTensorComm(c))
	})
}

func TestHostTensorAllReduceRounds(t *testing.T) {
	const w, n = 3, 999
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
		xs := randomInputs(11, w, n)
		round := map[kernels.DType]func(float32) float32{
			kernels.F32: func(v float32) float32 { return v }, kernels.F16: cpu.RoundF16, kernels.BF16: cpu.RoundBF16,
		}[dt]
		for r := range xs { // inputs as the tensors store them
			for i := range xs[r] {
				xs[r][i] = round(xs[r][i])
			}
		}
		sum := seqReduce(xs, Avg)
		want := make([]float32, n)
		rounded := 0
		for i, v := range sum {
			want[i] = round(v)
			if want[i] != v {
				rounded++
			}
		}
		if dt != kernels.F32 && rounded == 0 {
			t.Fatalf("%v: test data needs no rounding; it cannot tell", dt)
		}
		out := make([][]float32, w)
		tensorRanks(t, w, func(r int, b kernels.Backend, c DeviceCommunicator) error {
			x := b.New(kernels.CatGrads, dt, 9, n/9)
			b.Upload(x, xs[r])
			if err := c.AllReduce(x, Avg); err != nil {
				return err
			}
			out[r] = make([]float32, n)
			b.Download(x, out[r])
			return nil
		})
		for r := range w {
			sameBits(t, fmt.Sprintf("%v rank %d", dt, r), out[r], want)
		}
	}
}

func TestHostTensorShardAndGather(t *testing.T) {
	const w, n = 4, 250
	xs := randomInputs(12, w, w*n)
	for r := range xs {
		for i := range xs[r] {
			xs[r][i] = cpu.RoundBF16(xs[r][i])
		}
	}
	sum := seqReduce(xs, Sum)
	for i := range sum {
		sum[i] = cpu.RoundBF16(sum[i])
	}
	out := make([][]float32, w)
	tensorRanks(t, w, func(r int, b kernels.Backend, c DeviceCommunicator) error {
		full := b.New(kernels.CatGrads, kernels.BF16, w*n)
		shard := b.New(kernels.CatGrads, kernels.BF16, n)
		b.Upload(full, xs[r])
		if err := c.ReduceScatter(shard, full, Sum); err != nil {
			return err
		}
		b.Fill(full, 0)
		if err := c.AllGather(full, shard); err != nil {
			return err
		}
		if err := c.Broadcast(full, 2); err != nil {
			return err
		}
		out[r] = make([]float32, w*n)
		b.Download(full, out[r])
		return nil
	})
	for r := range w {
		sameBits(t, fmt.Sprintf("rank %d", r), out[r], sum)
	}
}

func TestHostTensorRejectsDeviceTensors(t *testing.T) {
	c := NewHostTensorComm(NewGroup(1).Comm(0))
	dev := &kernels.Tensor{Shape: []int{4}, Dev: 0x1000}
	if err := c.AllReduce(dev, Sum); err == nil || !strings.Contains(err.Error(), "device tensor") {
		t.Fatalf("AllReduce of a device tensor: %v", err)
	}
	b := cpu.New()
	a, h := b.New(kernels.CatGrads, kernels.F32, 4), b.New(kernels.CatGrads, kernels.F16, 4)
	if err := c.AllGather(a, h); err == nil || !strings.Contains(err.Error(), "dtypes differ") {
		t.Fatalf("AllGather with mixed dtypes: %v", err)
	}
}
