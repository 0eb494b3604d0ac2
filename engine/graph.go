package engine

import (
	"errors"
	"fmt"

	"resnetlab/kernels"
)

// A step splits in two (Engine.StepAccum):
//
//   - compute: forward, loss, backward and the gradients' collection into
//     the buffers Adam reads. Its ops' arguments are fixed once the batch
//     shape is: the input tensors, the model's buffers and the loss scale
//     (SoftmaxCrossEntropy's scale argument). On one rank it needs no host
//     transfer or wait, so it can be captured into a graph (kernels.Capturer)
//     and replayed with one launch.
//   - update: the loss and overflow read, the loss scaler, Adam (its step
//     count and learning rate change every step, and CUDA graphs freeze
//     scalars) and publishing the weights. Always eager.
//
// The graph is captured after warm-up eager steps (lazily allocated
// buffers and tables exist by then), replaced when the loss scale or the
// input tensors change, and dropped when something may have moved the
// model's buffers (DropGraph: evaluation at another batch size, LoadState).

// DefaultGraphWarmup is the eager steps before a capture.
const DefaultGraphWarmup = 2

// ErrCapture wraps every failure to capture the step.
var ErrCapture = errors.New("graph capture of the train step failed")

// stepGraph is the captured compute part of a step.
type stepGraph struct {
	cap      kernels.Capturer
	warmup   int // eager steps after a start or a drop
	left     int // eager steps still to run before a capture
	g        kernels.Graph
	x, y     *kernels.Tensor // the inputs it reads
	scale    float32         // the loss scale it applies
	captures int
	replays  int
}

// GraphStats counts a run's graph captures and replays.
type GraphStats struct{ Captures, Replays int }

// newStepGraph checks that this engine can capture its compute part.
func (e *Engine) newStepGraph() (*stepGraph, error) {
	c, ok := e.be.(kernels.Capturer)
	if !ok {
		return nil, fmt.Errorf("parallel: graphs: the %s backend cannot capture", e.be.Name())
	}
	if e.lay.world != 1 {
		return nil, fmt.Errorf("parallel: graphs need one rank (the collectives of %d ranks synchronise on the host)", e.lay.world)
	}
	w := e.cfg.GraphWarmup
	if w <= 0 {
		w = DefaultGraphWarmup
	}
	return &stepGraph{cap: c, warmup: w, left: w}, nil
}

// run does the compute part fn of a step on batch b: eagerly during
// warm-up, else by replaying the graph, captured first if there is none
// or if it was captured with other inputs or another loss scale. ranGo
// says whether fn's Go code ran (eagerly or while capturing).
func (s *stepGraph) run(b Batch, scale float32, fn func() error) (ranGo bool, err error) {
	if s.left > 0 {
		s.left--
		return true, fn()
	}
	if s.g != nil && (s.x != b.X || s.y != b.Labels || s.scale != scale) {
		s.drop(false)
	}
	if s.g == nil {
		if err := s.capture(fn); err != nil {
			return true, err
		}
		s.x, s.y, s.scale = b.X, b.Labels, scale
		ranGo = true
	}
	s.replays++
	return ranGo, s.g.Launch()
}

// capture records fn. A host transfer or wait inside fn panics in the
// backend; it comes back as an error naming the cause, and the capture is
// ended so the backend stays usable.
func (s *stepGraph) capture(fn func() error) (err error) {
	if err := s.cap.BeginCapture(); err != nil {
		return fmt.Errorf("%w: %w", ErrCapture, err)
	}
	defer func() {
		p := recover()
		g, endErr := s.cap.EndCapture()
		switch {
		case p != nil:
			err = fmt.Errorf("%w: %v", ErrCapture, p)
		case err != nil:
			err = fmt.Errorf("%w: %w", ErrCapture, err)
		case endErr != nil:
			err = fmt.Errorf("%w: %w", ErrCapture, endErr)
		}
		if err != nil {
			if g != nil {
				g.Destroy()
			}
			return
		}
		s.g = g
		s.captures++
	}()
	return fn()
}

// drop destroys the graph; with rewarm the next steps warm up again.
func (s *stepGraph) drop(rewarm bool) {
	if s.g != nil {
		s.g.Destroy()
		s.g = nil
	}
	if rewarm {
		s.left = s.warmup
	}
}

// DropGraph destroys the captured step, if any: call it after anything
// that may move the model's buffers (an evaluation, a checkpoint load).
// The next steps warm up and capture again.
func (e *Engine) DropGraph() {
	if e.graph != nil {
		e.graph.drop(true)
	}
}

// GraphStats says how often the step was captured and replayed.
func (e *Engine) GraphStats() GraphStats {
	if e.graph == nil {
		return GraphStats{}
	}
	return GraphStats{Captures: e.graph.captures, Replays: e.graph.replays}
}
