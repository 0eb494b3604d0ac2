package gemini

import (
	"fmt"
	"math"

	"resnetlab/kernels"
	"resnetlab/model"
)

// tensorInfo is one parameter inside its chunk.
type tensorInfo struct {
	name  string
	p     *model.Param
	idx   int // index in model.Params()
	c     *chunk
	off   int // first element inside the chunk
	n     int
	shape []int
	state TensorState
}

// slot is one managed tensor and where it lives (t is nil when Nowhere).
// While an asynchronous move into it is in flight, pend is set: on is
// already the destination, and nothing may touch t before g.ready(slot).
type slot struct {
	t    *kernels.Tensor
	on   Location
	pend *pending
	// clean is the host tensor a payload was uploaded from, kept while the
	// device copy equals it (on == Device): evicting the payload then frees
	// the device copy and points the slot back at clean, and nothing
	// crosses the link. Anything that writes the device copy drops clean
	// first (dirty). Parameters change only at the optimizer step, so a
	// chunk evicted and fetched again within a step moves one way.
	clean *kernels.Tensor
}

// pending is a slot's move in flight: an upload (src nil) or an offload,
// whose device source stays allocated, and counted against the budget,
// until the move completes.
type pending struct {
	mv    kernels.Move
	src   *kernels.Tensor
	check bool   // a gradient shard offload: check it for inf/NaN once complete
	grad  *chunk // ... and start the chunk's early host Adam (early.go)
}

// optGroup is a chunk's optimizer chunk: this rank's shard of the fp32
// master weights and Adam moments, plus the reduced fp32 gradient shard
// between the reduction and the Adam step. All four live together.
type optGroup struct {
	master, m, v, g *kernels.Tensor
	on              Location
	// spareG is the host gradient shard kept between steps while the
	// group is in host memory, so a step does not allocate (and fault in)
	// a fresh host buffer per chunk; every reduction overwrites all of it.
	spareG *kernels.Tensor
	// wb is the upload of a host master into the device parameters still
	// possibly reading master (pinned memory is read by the DMA itself):
	// finished before anything writes master again.
	wb kernels.Move
	// next is the second set of host buffers (master, m, v) that an early
	// host Adam writes before the overflow vote (early.go); allocated on
	// the first early update.
	next [3]*kernels.Tensor
	// nextPay is the spare host payload (or shard) an early update rounds
	// the new master weights into while the parameters rest in host
	// memory (early.go).
	nextPay *kernels.Tensor
}

// chunk is a fixed-capacity flat buffer of parameters of one dtype, packed
// in order of first use. A sharded chunk keeps only this rank's shard
// persistently and materialises the full payload (by all-gather) around
// its uses; a replicated ("kept gathered") chunk keeps the full payload.
type chunk struct {
	id       int
	dt       kernels.DType
	size     int // capacity in elements, a multiple of the world size
	used     int // elements holding parameters (the rest is zero padding)
	tensors  []*tensorInfo
	sharded  bool
	shardLen int // elements this rank owns: size/world when sharded, else size
	ownOff   int // first owned element
	payload  slot
	shard    slot // sharded chunks only
	grad     slot // during backward, until the chunk is reduced
	opt      optGroup
	home     Location // where the parameters rest when the budget allows (policy)
	uses     []int    // hook indices of the traced step that need the chunk
	lastUse  int64    // outside Step: when an operator last fetched it (Gemini.clock)
}

func (c *chunk) payloadBytes() int64 { return int64(c.size) * int64(c.dt.Size()) }

// ownBytes is this rank's persistent parameter bytes of the chunk.
func (c *chunk) ownBytes() int64 { return int64(c.shardLen) * int64(c.dt.Size()) }

// optBytes is the optimizer group's bytes: master, m, v and gradient shard.
func (c *chunk) optBytes() int64 { return 16 * int64(c.shardLen) }

// allIn reports whether every tensor of the chunk is in one of states.
func (c *chunk) allIn(states ...TensorState) bool {
	for _, t := range c.tensors {
		ok := false
		for _, s := range states {
			ok = ok || t.state == s
		}
		if !ok {
			return false
		}
	}
	return true
}

// packing is the chunk layout of a parameter list.
type packing struct {
	chunks  []*chunk
	tensors []*tensorInfo // per parameter index
}

// pack places params (in their order, which is the order of first use) into
// chunks: one open chunk per dtype; a parameter that does not fit closes
// its dtype's chunk and opens the next, so no parameter spans chunks.
// capacity gives each dtype's chunk size in elements.
func pack(params []*model.Param, capacity map[kernels.DType]int) (*packing, error) {
	pk := &packing{}
	open := map[kernels.DType]*chunk{}
	for i, p := range params {
		dt, n := p.W.DType, p.W.Len()
		cp := capacity[dt]
		if n > cp {
			return nil, fmt.Errorf("gemini: parameter %s has %d elements, more than the chunk capacity %d (raise chunk_size)", p.Name, n, cp)
		}
		c := open[dt]
		if c == nil || c.used+n > c.size {
			c = &chunk{id: len(pk.chunks), dt: dt, size: cp}
			pk.chunks = append(pk.chunks, c)
			open[dt] = c
		}
		t := &tensorInfo{name: p.Name, p: p, idx: i, c: c, off: c.used, n: n, shape: append([]int(nil), p.W.Shape...)}
		c.used += n
		c.tensors = append(c.tensors, t)
		pk.tensors = append(pk.tensors, t)
	}
	return pk, nil
}

// chunkCapacities picks every dtype group's chunk size: elems when set,
// else the size with the least padding (searchChunkElems); a group smaller
// than that gets one chunk of exactly its size. Sizes are rounded up to a
// multiple of world so chunks split evenly into shards.
func chunkCapacities(params []*model.Param, elems, world int) map[kernels.DType]int {
	sizes := map[kernels.DType][]int{}
	for _, p := range params {
		sizes[p.W.DType] = append(sizes[p.W.DType], p.W.Len())
	}
	caps := map[kernels.DType]int{}
	for dt, s := range sizes {
		c := elems
		if c <= 0 {
			c = searchChunkElems(s)
		}
		if total := sum(s); total < c {
			c = total
		}
		caps[dt] = roundUp(c, world)
	}
	return caps
}

// searchChunkElems returns the capacity in [largest, 2*largest] whose
// packing of sizes wastes the fewest padding elements (the smallest such
// capacity on ties), like ColossalAI's search_chunk_configuration.
func searchChunkElems(sizes []int) int {
	largest := 0
	for _, s := range sizes {
		largest = max(largest, s)
	}
	step := max(1, largest/512)
	best, bestWaste := largest, math.MaxInt
	for c := largest; c <= 2*largest; c += step {
		if w := packWaste(sizes, c); w < bestWaste {
			best, bestWaste = c, w
		}
	}
	return best
}

// packWaste is the padding of packing sizes in order into chunks of c.
func packWaste(sizes []int, c int) int {
	chunks, fill := 0, c
	for _, s := range sizes {
		if fill+s > c {
			chunks++
			fill = 0
		}
		fill += s
	}
	return chunks*c - sum(sizes)
}

func sum(s []int) int {
	t := 0
	for _, x := range s {
		t += x
	}
	return t
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }
