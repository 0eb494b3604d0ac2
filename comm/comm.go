package comm

import (
	"errors"
	"fmt"
)

// Op is a reduction operator.
type Op uint8

const (
	Sum Op = iota // element-wise sum in rank order
	Avg           // the sum divided by the world size
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

func (o Op) valid() bool { return o == Sum || o == Avg }

// ErrAborted is wrapped by every error of a collective that could not
// complete because the group was aborted (a rank failed, returned, or the
// run's context was cancelled). The abort's cause is wrapped too.
var ErrAborted = errors.New("collective aborted")

// Communicator runs collectives over float32 host buffers among the ranks
// of one group. Every rank must call the same collectives in the same order
// with the same lengths; a mismatch is reported as an error on every rank.
// A call returns when this rank's part is done and its buffers may be reused.
// Calls on one Communicator must not overlap, but any goroutine may make
// them (e.g. a rank's gradient-bucket goroutine while backward runs).
type Communicator interface {
	Rank() int
	WorldSize() int
	// AllReduce replaces buf on every rank by the reduction over ranks.
	AllReduce(buf []float32, op Op) error
	// ReduceScatter reduces src (world*len(dst) elements) over ranks and
	// writes block Rank() of the result into dst. dst may be exactly block
	// Rank() of src (in place), and must not overlap src otherwise.
	ReduceScatter(dst, src []float32, op Op) error
	// AllGather writes rank r's src into block r of dst (world*len(src)
	// elements) on every rank. src may be exactly block Rank() of dst.
	AllGather(dst, src []float32) error
	// Broadcast copies root's buf into buf on every rank.
	Broadcast(buf []float32, root int) error
	// Barrier returns once every rank has entered it.
	Barrier() error
}
