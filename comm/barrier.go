package comm

import (
	"fmt"
	"sync"
)

// barrier is a reusable barrier for n goroutines that can be aborted: once
// aborted, every pending and future wait returns the abort error, so no rank
// stays blocked when a peer has failed.
type barrier struct {
	mu    sync.Mutex
	cond  sync.Cond
	n     int
	count int
	gen   uint64
	err   error
}

func newBarrier(n int) *barrier {
	b := &barrier{n: n}
	b.cond.L = &b.mu
	return b
}

func (b *barrier) wait() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	gen := b.gen
	b.count++
	if b.count == b.n {
		b.count = 0
		b.gen++
		b.cond.Broadcast()
		return nil
	}
	for gen == b.gen && b.err == nil {
		b.cond.Wait()
	}
	if gen != b.gen {
		return nil // completed before (or while) an abort came in
	}
	return b.err
}

// abort fails every pending and future wait with cause; the first cause wins.
func (b *barrier) abort(cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = fmt.Errorf("%w: %w", ErrAborted, cause)
	}
	b.cond.Broadcast()
}
