package cpu

import (
	"sync"
	"sync/atomic"
)

// parallel runs fn over [0,n) cut into contiguous chunks of at least
// grain indices, handed out dynamically (a few chunks per worker, so a
// worker whose thread is descheduled does not hold the others up). fn must
// treat every index independently: results never depend on the split.
func (b *Backend) parallel(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	chunks := min((n+grain-1)/grain, 4*b.workers)
	if chunks <= 1 || b.workers == 1 {
		fn(0, n)
		return
	}
	b.tasks(chunks, func(_, i int) {
		fn(i*n/chunks, (i+1)*n/chunks)
	})
}

// tasks runs fn(worker, i) for every i in [0,n), handing tasks out
// dynamically. Each task must write its own outputs only, so the result
// does not depend on which worker runs it.
func (b *Backend) tasks(n int, fn func(worker, i int)) {
	w := min(b.workers, n)
	if w <= 1 {
		for i := range n {
			fn(0, i)
		}
		return
	}
	var next atomic.Int64
	run := func(worker int) {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			fn(worker, i)
		}
	}
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for k := 1; k < w; k++ {
		go func() {
			defer wg.Done()
			run(k)
		}()
	}
	run(0)
	wg.Wait()
}
