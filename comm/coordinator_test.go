package comm

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// within fails the test if fn does not return within d (a hang).
func within(t *testing.T, d time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("still blocked after %v", d)
		return nil
	}
}

func TestLaunchCoordinator(t *testing.T) {
	const w = 4
	seen := make([]atomic.Int32, w)
	err := Launch(w, func(c *Coordinator) error {
		if c.WorldSize() != w || c.LocalRank() != c.Rank() || c.IsMaster() != (c.Rank() == 0) {
			return errors.New("wrong identity: " + c.String())
		}
		seen[c.Rank()].Add(1)
		buf := []float32{1}
		if err := c.Comm().AllReduce(buf, Sum); err != nil {
			return err
		}
		if buf[0] != w {
			return errors.New("all-reduce of ones did not give the world size")
		}
		return c.Barrier()
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range seen {
		if seen[r].Load() != 1 {
			t.Fatalf("rank %d ran %d times", r, seen[r].Load())
		}
	}
}

var errBoom = errors.New("boom")

// TestAbortUnblocksCollective: rank 1 fails before a collective; rank 0,
// blocked in AllReduce, must get an error instead of hanging.
func TestAbortUnblocksCollective(t *testing.T) {
	var rank0 error
	err := within(t, 5*time.Second, func() error {
		return Launch(2, func(c *Coordinator) error {
			if c.Rank() == 1 {
				time.Sleep(20 * time.Millisecond) // let rank 0 block first
				return errBoom
			}
			rank0 = c.Comm().AllReduce(make([]float32, 10), Sum)
			if c.Context().Err() == nil {
				t.Error("rank 0's context was not cancelled")
			}
			return rank0
		})
	})
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("Launch returned %v, want rank 1's boom", err)
	}
	if !errors.Is(rank0, ErrAborted) || !errors.Is(rank0, errBoom) {
		t.Fatalf("rank 0's AllReduce returned %v, want ErrAborted caused by boom", rank0)
	}
}

func TestAbortOnPanicAndEarlyReturn(t *testing.T) {
	err := within(t, 5*time.Second, func() error {
		return Launch(3, func(c *Coordinator) error {
			if c.Rank() == 2 {
				panic("rank two exploded")
			}
			return c.Barrier()
		})
	})
	if err == nil || !strings.Contains(err.Error(), "rank two exploded") {
		t.Fatalf("Launch returned %v, want the panic", err)
	}
	// Rank 0 returns nil; rank 1's later collective can never complete.
	err = within(t, 5*time.Second, func() error {
		return Launch(2, func(c *Coordinator) error {
			if c.Rank() == 0 {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
			return c.Barrier()
		})
	})
	if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "rank 0 has returned") {
		t.Fatalf("Launch returned %v, want an abort naming rank 0", err)
	}
}

func TestLaunchContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	err := within(t, 5*time.Second, func() error {
		return LaunchContext(ctx, 3, func(c *Coordinator) error {
			if c.Rank() == 0 {
				<-c.Context().Done()
				return c.Context().Err()
			}
			return c.Barrier()
		})
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Launch returned %v, want context.Canceled", err)
	}
	if err := Launch(0, func(*Coordinator) error { return nil }); err == nil {
		t.Fatal("Launch(0) returned no error")
	}
}

func TestPriorityExecution(t *testing.T) {
	const w = 3
	var order []int
	var mu = make(chan struct{}, 1)
	err := Launch(w, func(c *Coordinator) error {
		return c.PriorityExecution(func() error {
			mu <- struct{}{}
			order = append(order, c.Rank())
			<-mu
			if c.IsMaster() {
				time.Sleep(20 * time.Millisecond) // the others must still wait
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != w || order[0] != 0 {
		t.Fatalf("execution order %v, want the master first, then the %d others", order, w-1)
	}

	var ran atomic.Int32
	errs := make([]error, w)
	Launch(w, func(c *Coordinator) error {
		errs[c.Rank()] = c.PriorityExecution(func() error {
			ran.Add(1)
			if c.IsMaster() {
				return errBoom
			}
			return nil
		})
		return nil
	})
	if ran.Load() != 1 || !errors.Is(errs[0], errBoom) {
		t.Fatalf("master failing: %d ran, master got %v", ran.Load(), errs[0])
	}
	for r := 1; r < w; r++ {
		if !errors.Is(errs[r], ErrMasterFailed) {
			t.Fatalf("rank %d got %v, want ErrMasterFailed", r, errs[r])
		}
	}
}
