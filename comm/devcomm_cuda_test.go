package comm

import (
	"fmt"
	"testing"
	"time"

	"resnetlab/kernels"
	"resnetlab/kernels/cuda"

	"resnetlab/internal/testutil"
)

// DeviceComm on real GPU ranks (skipped without a GPU). On the device
// machine these run from a compiled test binary (scripts/device_check.sh,
// stage comm):
//
//	CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .dev/comm.test ./comm
//	.dev/comm.test -test.run 'Device|NCCL' -test.v
//	.dev/comm.test -test.run '^$' -test.bench DeviceComm -test.benchtime 30x

// TestDeviceCommCUDA runs the CPU suite on 2 and 3 ranks sharing GPU 0
// (one primary context, one stream each), and on 2 GPUs where there are
// two: the GPU's copies, adds, scales and conversions must give the same
// bits as the plain loops.
func TestDeviceCommCUDA(t *testing.T) {
	n := testutil.NeedGPU(t)
	sizes := []int{7, 1, 0, 1001, 1<<20 + 3}
	for _, w := range []int{2, 3} {
		for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
			devCommSuite(t, w, dt, sizes, testutil.OnDevices(0))
		}
	}
	if n >= 2 {
		for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
			devCommSuite(t, 2, dt, sizes, testutil.OnDevices(0, 1))
		}
	} else {
		t.Log("one GPU: the cross-device case (cuMemcpyPeerAsync) is not run")
	}
}

// TestDeviceCommCUDAOrdering hunts for missing fences: each rank's input
// is produced by a kernel queued just before the collective, one rank's
// stream is held back by a pile of extra kernels in turn, and each rank
// overwrites its buffer right after the collective returns. A rank that
// read a peer's buffer too early (stale input) or too late (overwritten)
// gets a wrong sum.
func TestDeviceCommCUDAOrdering(t *testing.T) {
	testutil.NeedGPU(t)
	const w, n, iters = 3, 1 << 22, 24
	results := make([][]float32, w)
	onRanks(t, w, func(r int, c Communicator) error {
		be, err := cuda.New(0)
		if err != nil {
			return err
		}
		defer be.Close()
		d, err := NewDeviceComm(be, c)
		if err != nil {
			return err
		}
		defer d.Free()
		x := be.New(kernels.CatGrads, kernels.F32, n)
		slow := be.New(kernels.CatWorkspace, kernels.F32, 4*n)
		out := be.New(kernels.CatGrads, kernels.F32, 2*iters)
		for i := range iters {
			if i%w == r { // this rank's stream runs late this time
				for range 20 {
					be.Scale(slow, 1.0001)
				}
			}
			be.Fill(x, float32((i+1)*(r+1)))
			if err := d.AllReduce(x, Sum); err != nil {
				return err
			}
			be.Copy(kernels.View(out, 2*i, 1), kernels.View(x, 0, 1))     // rank 0's block
			be.Copy(kernels.View(out, 2*i+1, 1), kernels.View(x, n-1, 1)) // rank w-1's block
			be.Fill(x, -1)                                                // overwrite at once
		}
		results[r] = make([]float32, 2*iters)
		be.Download(out, results[r])
		return nil
	})
	for r, got := range results {
		for i, v := range got {
			if want := float32((i/2 + 1) * w * (w + 1) / 2); v != want {
				t.Fatalf("rank %d iteration %d element %d: sum %v, want %v", r, i/2, i%2, v, want)
			}
		}
	}
}

// TestNCCLCheckedCUDA runs the suite's collectives through NCCL (one rank
// per GPU: NCCL refuses two ranks on one device) behind CheckedComm, with
// ForBackend's stream and context binding: the runner's comm = "nccl".
// fp32 with 2 ranks, where any summation order gives the same bits.
func TestNCCLCheckedCUDA(t *testing.T) {
	if testutil.NeedGPU(t) < 2 {
		t.Skip("NCCL in one process needs 2 GPUs (one rank each)")
	}
	l := loadNCCLOrSkip(t)
	comms, err := l.CommInitAll([]int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	onRanks(t, 2, func(r int, c Communicator) error {
		be, err := cuda.New(r)
		if err != nil {
			return err
		}
		defer be.Close()
		tc, err := comms[r].ForBackend(be)
		if err != nil {
			return err
		}
		defer tc.Free()
		d, err := NewCheckedComm(tc, c)
		if err != nil {
			return err
		}
		for i, n := range []int{7, 1001, 1<<20 + 3} {
			if err := devCommStep(be, d, kernels.F32, n, uint64(500+i)); err != nil {
				return err
			}
		}
		if err := d.Barrier(); err != nil {
			return err
		}
		release := be.Bind()
		defer release()
		return comms[r].Destroy()
	})
}

// BenchmarkDeviceCommAllReduce: one all-reduce (avg) of ResNet-18's
// gradient size, 11,181,642 fp32 values, among ranks sharing GPU 0, with
// the device synchronised after each (the cost a training step sees).
// The host-staged path took 45-70 ms per step for DDP (docs/benchmarks.md).
func BenchmarkDeviceCommAllReduce(b *testing.B) {
	n := testutil.NeedGPU(b)
	const elems = 11_181_642
	cases := []struct {
		name string
		devs []int
		w    int
	}{{"w2-gpu0", []int{0}, 2}, {"w3-gpu0", []int{0}, 3}}
	if n >= 2 {
		cases = append(cases, struct {
			name string
			devs []int
			w    int
		}{"w2-gpu0,1", []int{0, 1}, 2})
	}
	for _, c := range cases {
		for _, mk := range []struct {
			name string
			make commMaker
		}{{"device", func(be kernels.Backend, c Communicator) (DeviceCommunicator, error) { return NewDeviceComm(be, c) }}, {"staged", func(be kernels.Backend, c Communicator) (DeviceCommunicator, error) {
			return NewStagedComm(be, c), nil
		}}} {
			b.Run(fmt.Sprintf("%s/%s", c.name, mk.name), func(b *testing.B) {
				benchAllReduce(b, c.w, elems, testutil.OnDevices(c.devs...), mk.make)
			})
		}
	}
}

func benchAllReduce(b *testing.B, w, elems int, open func(int) (kernels.Backend, error), mk commMaker) {
	g := NewGroup(w)
	errs := make([]error, w)
	start := make(chan struct{})
	ready := make(chan struct{}, w)
	var elapsed time.Duration
	done := make(chan struct{}, w)
	bes := make([]kernels.Backend, w)
	comms := make([]DeviceCommunicator, w)
	xs := make([]*kernels.Tensor, w)
	for r := range w {
		go func() {
			defer func() { done <- struct{}{} }()
			fail := func(err error) {
				errs[r] = err
				g.Abort(err)
			}
			warm := func() error {
				be, err := open(r)
				if err != nil {
					return err
				}
				bes[r] = be
				if comms[r], err = mk(be, g.Comm(r)); err != nil {
					return err
				}
				xs[r] = be.New(kernels.CatGrads, kernels.F32, elems)
				be.Fill(xs[r], float32(r+1))
				for range 3 { // scratch allocation, first copies
					if err := comms[r].AllReduce(xs[r], Avg); err != nil {
						return err
					}
				}
				return be.Sync()
			}
			err := warm()
			ready <- struct{}{}
			if bes[r] != nil {
				defer closeIfCloser(bes[r])
			}
			if err != nil {
				fail(err)
				return
			}
			<-start
			t0 := time.Now()
			for range b.N {
				if err := comms[r].AllReduce(xs[r], Avg); err != nil {
					fail(err)
					return
				}
				if err := bes[r].Sync(); err != nil {
					fail(err)
					return
				}
			}
			if r == 0 {
				elapsed = time.Since(t0)
			}
		}()
	}
	for range w {
		<-ready
	}
	b.ResetTimer()
	close(start)
	for range w {
		<-done
	}
	b.StopTimer()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
	sec := elapsed.Seconds() / float64(b.N)
	b.ReportMetric(sec*1e3, "ms/allreduce")
	b.ReportMetric(4*float64(elems)/sec/1e9, "GB/s")
}

// commMaker makes a rank's tensor communicator for the benchmark.
type commMaker func(be kernels.Backend, c Communicator) (DeviceCommunicator, error)
