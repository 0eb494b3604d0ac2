package comm

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkAllReduce all-reduces ResNet-18's gradient size (11M floats)
// among in-process ranks. GB/s is the algorithm bandwidth (bytes of one
// rank's buffer per second); busGB/s scales it by 2(W-1)/W like nccl-tests,
// the traffic each rank moves in a ring, to compare with NCCL's numbers.
func BenchmarkAllReduce(b *testing.B) {
	const n = 11_000_000
	for _, w := range []int{2, 4} {
		b.Run(fmt.Sprintf("world=%d", w), func(b *testing.B) {
			g := NewGroup(w)
			bufs := make([][]float32, w)
			for r := range bufs {
				bufs[r] = make([]float32, n)
				for i := range bufs[r] {
					bufs[r][i] = float32(i%97) * 0.25
				}
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for r := range w {
				wg.Go(func() {
					c := g.Comm(r)
					for range b.N {
						if err := c.AllReduce(bufs[r], Avg); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			sec := b.Elapsed().Seconds() / float64(b.N)
			algbw := 4 * n / sec / 1e9
			b.ReportMetric(algbw, "GB/s")
			b.ReportMetric(algbw*2*float64(w-1)/float64(w), "busGB/s")
		})
	}
}

// BenchmarkProcCommAllReduce is BenchmarkAllReduce over loopback TCP
// (ProcComm, ranks as goroutines standing in for processes), beside the
// in-process Group of the same world to compare.
func BenchmarkProcCommAllReduce(b *testing.B) {
	const n = 11_000_000
	for _, w := range []int{2, 3} {
		b.Run(fmt.Sprintf("world=%d", w), func(b *testing.B) {
			pcs, errs := joinAll(b, w, fps(w, "bench"), 10*time.Second)
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			bufs := make([][]float32, w)
			for r := range bufs {
				bufs[r] = make([]float32, n)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for r := range w {
				wg.Go(func() {
					for range b.N {
						if err := pcs[r].AllReduce(bufs[r], Avg); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(4*n/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GB/s")
		})
	}
}
