package cpu

import (
	"sync"
	"sync/atomic"
)

// parallel runs fn over [0,n) split into contiguous ranges, one per worker,
// with at least grain indices per range. fn must treat every index
// independently: callers never let results depend on the split.
func (b *Backend) parallel(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	w := b.workers
	if grain < 1 {
		grain = 1
	}
	if m := (n + grain - 1) / grain; m < w {
		w = m
	}
	if w <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for i := 1; i < w; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	fn(0, n/w)
	wg.Wait()
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
