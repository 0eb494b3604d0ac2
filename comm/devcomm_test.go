package comm

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"

	"resnetlab/internal/testutil"
)

// The DeviceComm tests run the same suite (devCommSuite) on CPU backends
// here and on CUDA backends in devcomm_cuda_test.go.

func cpuRank(int) (kernels.Backend, error) { return cpu.New(cpu.WithWorkers(1)), nil }

var roundFns = map[kernels.DType]func(float32) float32{
	kernels.F32: func(v float32) float32 { return v }, kernels.F16: cpu.RoundF16, kernels.BF16: cpu.RoundBF16,
}

// storedInputs are randomInputs as a tensor of dt stores them.
func storedInputs(seed uint64, world, n int, dt kernels.DType) [][]float32 {
	xs := randomInputs(seed, world, n)
	for _, x := range xs {
		for i := range x {
			x[i] = roundFns[dt](x[i])
		}
	}
	return xs
}

// devReduce is DeviceComm's documented result: the fp32 sum in rank order,
// times float32(1/W) for Avg, rounded to dt.
func devReduce(xs [][]float32, op Op, dt kernels.DType) []float32 {
	out := seqReduce(xs, Sum)
	inv := 1 / float32(len(xs))
	for i, v := range out {
		if op == Avg {
			v *= inv
		}
		out[i] = roundFns[dt](v)
	}
	return out
}

// devCommSuite checks every collective of a DeviceComm on world ranks
// (backends from open) against plain loops over ranks, bit for bit, for
// each per-rank size in sizes with the same comm (so scratch tensors grow
// and shrink and fences are reused).
func devCommSuite(t *testing.T, world int, dt kernels.DType, sizes []int, open func(r int) (kernels.Backend, error)) {
	t.Helper()
	onRanks(t, world, func(r int, c Communicator) error {
		be, err := open(r)
		if err != nil {
			return err
		}
		defer closeIfCloser(be)
		d, err := NewDeviceComm(be, c)
		if err != nil {
			return err
		}
		defer d.Free()
		for i, n := range sizes {
			if err := devCommStep(be, d, dt, n, uint64(100*world+i)); err != nil {
				return fmt.Errorf("world %d %s n=%d: %w", world, dt, n, err)
			}
		}
		return d.Barrier()
	})
}

func closeIfCloser(be kernels.Backend) {
	if c, ok := be.(interface{ Close() }); ok {
		c.Close()
	}
}

// devCommStep runs each collective once on per-rank size n.
func devCommStep(be kernels.Backend, d DeviceCommunicator, dt kernels.DType, n int, seed uint64) error {
	w, r := d.WorldSize(), d.Rank()
	up := func(vals []float32) *kernels.Tensor {
		x := be.New(kernels.CatGrads, dt, len(vals))
		be.Upload(x, vals)
		return x
	}
	down := func(x *kernels.Tensor) []float32 {
		h := make([]float32, x.Len())
		be.Download(x, h)
		be.Free(x)
		return h
	}
	// All-reduce, sum and average, and reduce-scatter of W*n elements (not
	// in place for Avg, in place for Sum): block r of the full reduction.
	for _, op := range []Op{Sum, Avg} {
		xs := storedInputs(seed+uint64(op), w, n, dt)
		x := up(xs[r])
		if err := d.AllReduce(x, op); err != nil {
			return err
		}
		if err := testutil.DiffBits(fmt.Sprintf("AllReduce %s rank %d", op, r), down(x), devReduce(xs, op, dt)); err != nil {
			return err
		}
		full := storedInputs(seed+10+uint64(op), w, w*n, dt)
		src := up(full[r])
		dst := kernels.View(src, r*n, n)
		if op == Avg {
			dst = be.New(kernels.CatGrads, dt, n)
		}
		if err := d.ReduceScatter(dst, src, op); err != nil {
			return err
		}
		want := devReduce(full, op, dt)[r*n : r*n+n]
		if op == Avg {
			err := testutil.DiffBits(fmt.Sprintf("ReduceScatter %s rank %d", op, r), down(dst), want)
			if err != nil {
				return err
			}
			be.Free(src)
		} else if err := testutil.DiffBits(fmt.Sprintf("ReduceScatter in place rank %d", r), down(src)[r*n:r*n+n], want); err != nil {
			return err
		}
	}
	// All-gather, not in place and in place.
	xs := storedInputs(seed+20, w, n, dt)
	var all []float32
	for _, x := range xs {
		all = append(all, x...)
	}
	src, dst := up(xs[r]), be.New(kernels.CatParams, dt, w*n)
	if err := d.AllGather(dst, src); err != nil {
		return err
	}
	be.Free(src)
	if err := testutil.DiffBits(fmt.Sprintf("AllGather rank %d", r), down(dst), all); err != nil {
		return err
	}
	dst = be.New(kernels.CatParams, dt, w*n)
	own := kernels.View(dst, r*n, n)
	be.Upload(own, xs[r])
	if err := d.AllGather(dst, own); err != nil {
		return err
	}
	if err := testutil.DiffBits(fmt.Sprintf("AllGather in place rank %d", r), down(dst), all); err != nil {
		return err
	}
	// Broadcast from the last rank, then from rank 0.
	for _, root := range []int{w - 1, 0} {
		x := up(xs[r])
		if err := d.Broadcast(x, root); err != nil {
			return err
		}
		if err := testutil.DiffBits(fmt.Sprintf("Broadcast from %d rank %d", root, r), down(x), xs[root]); err != nil {
			return err
		}
	}
	return nil
}

var devSizes = []int{7, 1, 0, 1001, 13}

func TestDeviceCommCollectives(t *testing.T) {
	for _, w := range testWorlds {
		for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
			devCommSuite(t, w, dt, devSizes, cpuRank)
		}
	}
}

// TestDeviceCommMatchesHostForPowersOfTwo: where 1/W is exact, DeviceComm's
// Avg is the host's division, so the two comms agree bit for bit; for
// other W the reference above is the only truth (and the suite still
// requires the sum itself to be the host's).
func TestDeviceCommMatchesHostForPowersOfTwo(t *testing.T) {
	for _, w := range []int{1, 2, 4} {
		for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
			dev := runCollectives(t, w, dt, func(be kernels.Backend, c Communicator) DeviceCommunicator {
				d, err := NewDeviceComm(be, c)
				if err != nil {
					panic(err)
				}
				return d
			})
			host := runCollectives(t, w, dt, func(_ kernels.Backend, c Communicator) DeviceCommunicator {
				return NewHostTensorComm(c)
			})
			for r := range dev {
				if err := testutil.DiffBits(fmt.Sprintf("world %d %s rank %d", w, dt, r), dev[r], host[r]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// The reference itself: for W = 3 the two rules differ somewhere, so
	// the documented difference is real and the suite's reference matters.
	xs := storedInputs(5, 3, 4000, kernels.F32)
	if testutil.DiffBits("", devReduce(xs, Avg, kernels.F32), seqReduce(xs, Avg)) == nil {
		t.Fatal("x*(1/3) and x/3 agree on 4000 values: the test data cannot tell the rules apart")
	}
}

// TestDeviceCommRejectsBadCalls: argument errors are reported on every
// rank, and no rank hangs.
func TestDeviceCommRejectsBadCalls(t *testing.T) {
	const w = 3
	cases := []struct {
		name string
		call func(r int, be kernels.Backend, d *DeviceComm, c Communicator) error
		want string
	}{
		{"dtypes differ across ranks", func(r int, be kernels.Backend, d *DeviceComm, _ Communicator) error {
			dt := kernels.F32
			if r == 1 {
				dt = kernels.F16
			}
			return d.AllReduce(be.New(kernels.CatGrads, dt, 4), Sum)
		}, "rank 1 passed fp16 tensors, rank 0 passed fp32"},
		{"lengths differ", func(r int, be kernels.Backend, d *DeviceComm, _ Communicator) error {
			return d.Broadcast(be.New(kernels.CatGrads, kernels.F32, 4+r), 0)
		}, "rank 1 passed 5 elements"},
		{"bad reduce-scatter source", func(r int, be kernels.Backend, d *DeviceComm, _ Communicator) error {
			return d.ReduceScatter(be.New(kernels.CatGrads, kernels.F32, 2), be.New(kernels.CatGrads, kernels.F32, 5), Avg)
		}, "want world size 3 x len(dst) 2 = 6"},
		{"foreign tensor", func(r int, be kernels.Backend, d *DeviceComm, _ Communicator) error {
			return d.AllReduce(cpu.New().New(kernels.CatGrads, kernels.F32, 3), Sum)
		}, "does not belong to this rank's cpu backend"},
		{"host and device calls mixed", func(r int, be kernels.Backend, d *DeviceComm, c Communicator) error {
			if r == 2 {
				return c.AllReduce(make([]float32, 3), Sum)
			}
			return d.AllReduce(be.New(kernels.CatGrads, kernels.F32, 3), Sum)
		}, "rank 2 called AllReduce while rank 0 called device AllReduce"},
		{"bad op", func(r int, be kernels.Backend, d *DeviceComm, _ Communicator) error {
			return d.AllReduce(be.New(kernels.CatGrads, kernels.F32, 3), Op(9))
		}, "unknown reduction op 9"},
	}
	for _, tc := range cases {
		errs := make([]error, w)
		onRanks(t, w, func(r int, c Communicator) error {
			be := cpu.New(cpu.WithWorkers(1))
			d, err := NewDeviceComm(be, c)
			if err != nil {
				return err
			}
			errs[r] = tc.call(r, be, d, c)
			return nil
		})
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: rank %d: got %v, want an error containing %q", tc.name, r, err, tc.want)
			}
		}
	}
}

type noPeer struct{ kernels.Backend }

func TestNewDeviceCommNeeds(t *testing.T) {
	g := NewGroup(1)
	if _, err := NewDeviceComm(noPeer{cpu.New()}, g.Comm(0)); err == nil || !strings.Contains(err.Error(), "kernels.Peer") {
		t.Fatalf("backend without Peer: %v", err)
	}
	if _, err := NewDeviceComm(cpu.New(), fakeComm{}); err == nil || !strings.Contains(err.Error(), "in-process Group") {
		t.Fatalf("foreign communicator: %v", err)
	}
}

type fakeComm struct{ Communicator }

// TestDeviceCommAbort: a rank that fails aborts the group; its peers'
// device collectives return ErrAborted instead of waiting.
func TestDeviceCommAbort(t *testing.T) {
	g := NewGroup(3)
	errs := make([]error, 3)
	done := make(chan struct{})
	go func() {
		defer close(done)
		onRanksOf(g, func(r int, c Communicator) {
			be := cpu.New(cpu.WithWorkers(1))
			d, err := NewDeviceComm(be, c)
			if err != nil {
				errs[r] = err
				return
			}
			if r == 2 {
				g.Abort(errors.New("rank 2 ran out of memory"))
				return
			}
			errs[r] = d.AllReduce(be.New(kernels.CatGrads, kernels.F32, 10), Sum)
		})
	}()
	<-done
	for r := range 2 {
		if !errors.Is(errs[r], ErrAborted) || !strings.Contains(errs[r].Error(), "out of memory") {
			t.Errorf("rank %d: %v, want ErrAborted with the cause", r, errs[r])
		}
	}
}

// onRanksOf runs fn on every rank of g and waits for all of them.
func onRanksOf(g *Group, fn func(r int, c Communicator)) {
	var wg sync.WaitGroup
	for r := range g.WorldSize() {
		wg.Go(func() { fn(r, g.Comm(r)) })
	}
	wg.Wait()
}
