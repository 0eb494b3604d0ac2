package runner

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// rankPool runs one goroutine per rank, each locked to its OS thread (a
// CUDA context is current per thread), and lets the run's driver hand all
// ranks the same piece of work at a step boundary. Commands (pause,
// checkpoint) are handled by the driver between pieces of work, so every
// rank sees them at the same step.
type rankPool struct {
	work  []chan func() error
	res   chan rankErr
	first int         // the world rank of the pool's rank 0 (0 unless the world spans processes)
	abort func(error) // unblocks collectives when a rank fails
	// explain, when set, rewrites a rank's error before anyone sees it (the
	// job names the device and the fix of an out-of-memory error). It runs
	// on the rank's own thread, where its CUDA context is current.
	explain func(rank int, err error) error
	wg      sync.WaitGroup
}

type rankErr struct {
	rank int
	err  error
}

func startRanks(n int, abort func(error)) *rankPool {
	p := &rankPool{res: make(chan rankErr, n), abort: abort}
	for r := 0; r < n; r++ {
		ch := make(chan func() error)
		p.work = append(p.work, ch)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for f := range ch {
				err := safely(f)
				if err != nil && p.explain != nil {
					err = p.explain(r, err)
				}
				p.res <- rankErr{r, err}
			}
		}()
	}
	return p
}

// safely turns a panic of one rank into an error, so the others are
// aborted instead of left waiting in a collective. A panic with an error
// value (the CUDA backend panics with *cuda.Error) stays in the chain, so
// errors.As still finds it.
func safely(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if e, ok := v.(error); ok {
				err = fmt.Errorf("panic: %w", e)
			} else {
				err = fmt.Errorf("panic: %v", v)
			}
		}
	}()
	return f()
}

// do runs f(rank) on every rank at once and waits for all of them. The
// first error (with its rank) is returned after aborting the group.
func (p *rankPool) do(f func(rank int) error) error {
	for r, ch := range p.work {
		ch <- func() error { return f(r) }
	}
	var first error
	for range p.work {
		re := <-p.res
		if re.err != nil && first == nil {
			first = withRank(p.first+re.rank, re.err)
			if p.abort != nil {
				p.abort(first)
			}
		}
	}
	return first
}

func (p *rankPool) close() {
	for _, ch := range p.work {
		close(ch)
	}
	p.wg.Wait()
}

// withRank prefixes err with its rank, unless it already names it (an
// *OOMError starts with "rank N on <device>").
func withRank(rank int, err error) error {
	var oe *OOMError
	if errors.As(err, &oe) && oe.Rank == rank {
		return err
	}
	return fmt.Errorf("rank %d: %w", rank, err)
}
