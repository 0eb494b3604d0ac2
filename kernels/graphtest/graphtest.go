package graphtest

import (
	"fmt"

	"resnetlab/kernels"
)

// Recorder is a kernels.Backend and kernels.Capturer over Inner.
type Recorder struct {
	kernels.Backend
	capturing bool
	ops       []func()
	freed     []*kernels.Tensor // freed during the capture: kept for the graph
	Captures  int               // EndCapture calls that made a graph
	Launches  int               // Graph.Launch calls
}

// New wraps be.
func New(be kernels.Backend) *Recorder { return &Recorder{Backend: be} }

// Graph is a recorded op sequence.
type Graph struct {
	r     *Recorder
	ops   []func()
	freed []*kernels.Tensor
}

// BeginCapture starts recording.
func (r *Recorder) BeginCapture() error {
	if r.capturing {
		return fmt.Errorf("graphtest: BeginCapture: a capture is already in progress")
	}
	r.capturing, r.ops = true, nil
	return nil
}

// EndCapture stops recording and returns the graph.
func (r *Recorder) EndCapture() (kernels.Graph, error) {
	if !r.capturing {
		return nil, fmt.Errorf("graphtest: EndCapture without BeginCapture")
	}
	r.capturing = false
	g := &Graph{r: r, ops: r.ops, freed: r.freed}
	r.ops, r.freed = nil, nil
	r.Captures++
	return g, nil
}

// Capturing reports whether a capture is in progress.
func (r *Recorder) Capturing() bool { return r.capturing }

// Launch replays the recorded ops.
func (g *Graph) Launch() error {
	if g.ops == nil {
		return fmt.Errorf("graphtest: Launch of a destroyed graph")
	}
	if g.r.capturing {
		return fmt.Errorf("graphtest: Launch inside a capture")
	}
	g.r.Launches++
	for _, op := range g.ops {
		op()
	}
	return nil
}

// Destroy drops the ops and frees what was freed during the capture.
func (g *Graph) Destroy() {
	g.ops = nil
	for _, t := range g.freed {
		g.r.Backend.Free(t)
	}
	g.freed = nil
}

// Free during a capture is withheld until the graph's Destroy, as the CUDA
// backend withholds the blocks: the graph still reads them.
func (r *Recorder) Free(t *kernels.Tensor) {
	if r.capturing {
		r.freed = append(r.freed, t)
		return
	}
	r.Backend.Free(t)
}

// do runs op now, or records it during a capture.
func (r *Recorder) do(op func()) {
	if r.capturing {
		r.ops = append(r.ops, op)
		return
	}
	op()
}

// refuse panics inside a capture, with the CUDA backend's reason.
func (r *Recorder) refuse(op string) {
	if r.capturing {
		panic(fmt.Sprintf("graphtest: %s cannot run inside a graph capture (it moves data to or from Go memory or waits for the device)", op))
	}
}

var (
	_ kernels.Backend  = (*Recorder)(nil)
	_ kernels.Capturer = (*Recorder)(nil)
)

var errSync = fmt.Errorf("graphtest: Sync during graph capture (end the capture first)")
