package comm

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
)

// Coordinator is one rank's view of the run, like ColossalAI's
// DistCoordinator: who it is, who the master is, and the host communicator
// for barriers and small collectives.
type Coordinator struct {
	ctx                    context.Context
	rank, localRank, world int
	comm                   Communicator
}

// NewCoordinator describes rank (of world) whose rank on its own machine is
// localRank (its GPU index). comm must connect all world ranks.
func NewCoordinator(ctx context.Context, rank, localRank, world int, comm Communicator) *Coordinator {
	return &Coordinator{ctx: ctx, rank: rank, localRank: localRank, world: world, comm: comm}
}

func (c *Coordinator) Rank() int                { return c.rank }
func (c *Coordinator) LocalRank() int           { return c.localRank }
func (c *Coordinator) WorldSize() int           { return c.world }
func (c *Coordinator) IsMaster() bool           { return c.rank == 0 }
func (c *Coordinator) Comm() Communicator       { return c.comm }
func (c *Coordinator) Context() context.Context { return c.ctx }
func (c *Coordinator) Barrier() error           { return c.comm.Barrier() }
func (c *Coordinator) String() string           { return fmt.Sprintf("rank %d/%d", c.rank, c.world) }

// ErrMasterFailed is returned by PriorityExecution on the other ranks when
// the master's fn failed; they then do not run fn.
var ErrMasterFailed = errors.New("the master rank's part failed")

// PriorityExecution runs fn on the master first; the other ranks wait, then
// run theirs concurrently (e.g. the master downloads or unpacks a data set,
// the others then read it). The master's success is broadcast, so when the
// master fails the others return ErrMasterFailed instead of running fn.
func (c *Coordinator) PriorityExecution(fn func() error) error {
	flag := []float32{0}
	if c.IsMaster() {
		err := fn()
		if err == nil {
			flag[0] = 1
		}
		if berr := c.comm.Broadcast(flag, 0); berr != nil && err == nil {
			return berr
		}
		return err
	}
	if err := c.comm.Broadcast(flag, 0); err != nil {
		return err
	}
	if flag[0] != 1 {
		return fmt.Errorf("parallel: rank %d skipped its PriorityExecution: %w", c.rank, ErrMasterFailed)
	}
	return fn()
}

// Launch runs fn on world in-process ranks (one goroutine each, local rank =
// rank) and waits for all of them; see LaunchContext.
func Launch(world int, fn func(c *Coordinator) error) error {
	return LaunchContext(context.Background(), world, fn)
}

// LaunchContext runs fn on world ranks and returns the first error any rank
// returned (or panicked with), prefixed with its rank. When a rank fails,
// the others' context is cancelled and every pending or later collective
// fails with ErrAborted, so no rank hangs waiting for the failed one. A rank
// that returns nil also aborts later collectives: they could never complete.
func LaunchContext(ctx context.Context, world int, fn func(c *Coordinator) error) error {
	if world < 1 {
		return fmt.Errorf("comm.Launch: world size %d, want >= 1", world)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g := NewGroup(world)
	stop := context.AfterFunc(ctx, func() { g.Abort(context.Cause(ctx)) })
	defer stop()

	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for r := range world {
		wg.Go(func() {
			err := runRank(r, fn, NewCoordinator(ctx, r, r, world, g.Comm(r)))
			if err == nil {
				g.Abort(fmt.Errorf("rank %d has returned", r))
				return
			}
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
			cancel(err)
		})
	}
	wg.Wait()
	return first
}

func runRank(r int, fn func(c *Coordinator) error, c *Coordinator) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("rank %d panicked: %v\n%s", r, p, debug.Stack())
		}
	}()
	if err := fn(c); err != nil {
		return fmt.Errorf("rank %d: %w", r, err)
	}
	return nil
}
