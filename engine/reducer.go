package engine

import (
	"fmt"

	"resnetlab/model"
)

// Gradient buckets are reduced as soon as they are complete, during
// backward, as torch DDP's Reducer does: the model's PostBackward hook says
// that a layer's parameter gradients are final, every bucket counts the
// parameters it still waits for, and a bucket whose count reaches zero is
// handed to the engine at once. Backward runs from fc to conv1, so the
// buckets (cut from the flat, state-dict ordered layout) complete roughly
// from the last to the first; every rank runs the same backward, so every
// rank launches the buckets in the same order, which the collectives need.

// reducer tracks which gradient buckets are complete during one backward.
// It is the model's Hooks; it acts only while armed (between begin and end)
// so evaluation or other backward passes never launch anything.
type reducer struct {
	index     map[*model.Param]int // parameter -> position in state-dict order
	bucketsOf [][]int              // the buckets each parameter overlaps
	count     []int                // parameters overlapping each bucket
	pending   []int                // parameters of a bucket not yet final in this backward
	final     []bool               // parameter's gradient final in this backward
	armed     bool
	ready     func(k int)     // called once per bucket and backward, when it is complete
	trace     func(ev string) // test hook: backward and launch events; nil in runs
}

func newReducer(params []*model.Param, l *layout, ready func(k int)) *reducer {
	r := &reducer{
		index:     make(map[*model.Param]int, len(params)),
		bucketsOf: make([][]int, len(params)),
		count:     make([]int, l.buckets),
		pending:   make([]int, l.buckets),
		final:     make([]bool, len(params)),
		ready:     ready,
	}
	for i, p := range params {
		r.index[p] = i
	}
	for k := range l.buckets {
		lo, hi := l.bucket(k)
		l.each(lo, hi, func(i, _, _, _ int) {
			r.bucketsOf[i] = append(r.bucketsOf[i], k)
			r.count[k]++
		})
	}
	return r
}

// begin arms the reducer for one backward.
func (r *reducer) begin() {
	copy(r.pending, r.count)
	clear(r.final)
	r.armed = true
}

// end disarms it and hands over, in bucket order, any bucket whose
// parameters' hooks did not all fire (a layer without hooks, or hooks
// replaced by someone else's SetHooks): late, but never lost.
func (r *reducer) end() {
	r.armed = false
	for k, n := range r.pending {
		if n > 0 {
			r.pending[k] = 0
			r.ready(k)
		}
	}
}

// PostBackward marks m's parameter gradients final.
func (r *reducer) PostBackward(m model.Module) {
	if !r.armed {
		return
	}
	for _, p := range m.Params() {
		i, ok := r.index[p]
		if !ok || r.final[i] {
			continue
		}
		r.final[i] = true
		for _, k := range r.bucketsOf[i] {
			if r.pending[k]--; r.pending[k] == 0 {
				r.ready(k)
			}
		}
	}
}

func (r *reducer) PreBackward(m model.Module) {
	if r.armed && r.trace != nil {
		r.trace("backward " + m.Name())
	}
}

func (r *reducer) PreForward(model.Module)  {}
func (r *reducer) PostForward(model.Module) {}

// bucketJob is one bucket's collective.
type bucketJob struct {
	k    int
	run  func() error
	done chan struct{} // closed once run has returned (or was skipped)
}

// commQueue runs one rank's gradient collectives, in launch order, on a
// goroutine of its own so they overlap the rest of backward. One queue
// serves one step: the rank's Communicator then has one caller at a time
// (this goroutine during backward, the rank after wait), and collectives
// stay in the same order on every rank. After a failed collective the rest
// are skipped: their peers fail too (the group is aborted or saw the same
// mismatch).
type commQueue struct {
	jobs  chan *bucketJob
	done  chan error
	trace func(ev string)
}

func newCommQueue(buckets int, trace func(string)) *commQueue {
	q := &commQueue{jobs: make(chan *bucketJob, buckets), done: make(chan error, 1), trace: trace}
	go q.loop()
	return q
}

func (q *commQueue) loop() {
	var first error
	for j := range q.jobs {
		if first == nil {
			if err := j.run(); err != nil {
				first = fmt.Errorf("gradient bucket %d: %w", j.k, err)
			}
			if q.trace != nil {
				q.trace(fmt.Sprintf("reduced %d", j.k))
			}
		}
		close(j.done)
	}
	q.done <- first
}

// wait closes the queue and returns once every launched collective is done,
// with the first error.
func (q *commQueue) wait() error {
	close(q.jobs)
	return <-q.done
}
