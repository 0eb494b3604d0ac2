package cuda

import (
	"fmt"
	"unsafe"

	"resnetlab/kernels"
)

// Graph is a captured sequence of ops that Launch replays with one driver
// call. What was captured is fixed: the tensors' device addresses and every
// scalar argument (learning rate, loss scale, Adam's step count). Re-capture
// when those change, or keep such ops outside the graph. The tensors a
// graph touches must stay allocated until the graph is destroyed.
type Graph struct {
	b      *Backend
	exec   uintptr
	blocks map[int64][]uintptr // scratch freed during capture, owned by the graph
}

// BeginCapture starts recording the ops issued on this backend into a graph
// instead of running them. Upload, Download, NonFinite and Sync are not
// allowed until EndCapture. The capture is in relaxed mode, so other
// goroutines (other ranks) may keep allocating meanwhile.
func (b *Backend) BeginCapture() error {
	defer b.bind()()
	if b.capturing {
		return fmt.Errorf("cuda: BeginCapture: a capture is already in progress")
	}
	if err := call("cuStreamBeginCapture_v2", drv.cuStreamBeginCapture, b.stream, captureModeRelaxed); err != nil {
		return err
	}
	b.capturing = true
	b.alloc.beginCapture()
	return nil
}

var _ kernels.Capturer = (*Backend)(nil)

// EndCapture stops recording and instantiates the graph (a *Graph).
func (b *Backend) EndCapture() (kernels.Graph, error) {
	defer b.bind()()
	if !b.capturing {
		return nil, fmt.Errorf("cuda: EndCapture without BeginCapture")
	}
	b.capturing = false
	blocks := b.alloc.endCapture()
	var g uintptr
	if err := call("cuStreamEndCapture", drv.cuStreamEndCapture, b.stream, uintptr(unsafe.Pointer(&g))); err != nil {
		b.alloc.giveBack(blocks)
		return nil, err
	}
	defer func() { _ = call("cuGraphDestroy", drv.cuGraphDestroy, g) }()
	gr := &Graph{b: b, blocks: blocks}
	if err := call("cuGraphInstantiateWithFlags", drv.cuGraphInstantiateWithFlags, uintptr(unsafe.Pointer(&gr.exec)), g, 0); err != nil {
		b.alloc.giveBack(blocks)
		return nil, err
	}
	return gr, nil
}

// Launch queues one replay of the graph on the backend's stream.
func (g *Graph) Launch() error {
	defer g.b.bind()()
	if g.exec == 0 {
		return fmt.Errorf("cuda: Launch of a destroyed graph")
	}
	return call("cuGraphLaunch", drv.cuGraphLaunch, g.exec, g.b.stream)
}

// Destroy frees the graph; its scratch blocks return to the allocator
// (stream order keeps them from being reused before queued replays end).
func (g *Graph) Destroy() {
	if g.exec == 0 {
		return
	}
	defer g.b.bind()()
	_ = call("cuGraphExecDestroy", drv.cuGraphExecDestroy, g.exec)
	g.exec = 0
	g.b.alloc.giveBack(g.blocks)
	g.blocks = nil
}
