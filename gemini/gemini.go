package gemini

import (
	"fmt"

	"resnetlab/comm"
	"resnetlab/engine"
	"resnetlab/kernels"
	"resnetlab/model"
)

// Gemini is one rank's chunk-managed model and HybridAdam optimizer. It
// implements engine.Trainer; Step, State and LoadState are collectives,
// and so is every Forward of Model() when chunks are sharded over ranks
// (each rank must run it: the chunks are all-gathered).
type Gemini struct {
	cfg         Config
	dev, host   kernels.Backend
	comm        comm.DeviceCommunicator
	world, rank int
	m           *model.ResNet
	params      []*model.Param
	chunks      []*chunk
	clock       int64         // operators run outside Step (chunk.lastUse)
	tensors     []*tensorInfo // per parameter index
	byParam     map[*model.Param]*tensorInfo
	ce          *model.CrossEntropy
	tail        engine.Tail     // overflow vote, scaler, Adam's step, buffer broadcast
	flag        *kernels.Tensor // the vote's device element (released in Free)

	calls      int // Step calls, for the warm-up
	managedDev int64
	stage      []float32
	mv         kernels.AsyncMover
	early      earlyAdam
	// Host tensors live in the device's pinned memory when it has some
	// (pin, with hostAdopt wrapping it as host tensors), so chunk moves and
	// gradient offloads are DMA without a staging copy.
	pin         kernels.PinnedHost
	hostAdopt   adopter
	pinned      map[*kernels.Tensor]bool
	pinnedBytes int64
	offloads    []*slot // slots whose offload is in flight, oldest first
	freeing     int64   // device bytes those offloads free when they complete

	training bool // inside Step: hooks count operators and may trace
	hook     int  // index of the next hook call of this step
	offTrace bool // this step left the traced operator order
	stepPeak int64
	tr       tracer
	err      error  // first failure inside a hook (a collective), returned by Step
	overNote string // where the budget could not be met, for the error message
	stats    Stats
	ms       memStep // this step's traffic and snapshots (memstats.go)
	chk      gradCheck
}

// Stats are counters for reports and tests.
type Stats struct {
	PeakDevice int64 // largest device MemStats().TotalPeak seen in a Step
	Moves      int   // chunk parts moved between device and host
	BytesMoved int64
	Gathers    int // all-gathers of sharded chunks
	Reductions int // chunk gradient reductions
	DeviceAdam int // optimizer chunks updated on the device, last step
	HostAdam   int // optimizer chunks updated on the host, last step
	EarlyAdam  int // host optimizer chunk updates started before the overflow vote, in all
	// EarlyWriteBacks counts write-backs into host parameters done by an
	// early update (rounded during backward, swapped in at the step).
	EarlyWriteBacks int
	Traced          bool
	NonModelPeak    int64 // largest non-model bytes of any traced operator
	// Prefetches counts uploads issued ahead of their operator (in Moves).
	Prefetches int
	// Stalls counts moves still in flight when their data was needed: an
	// upload when its operator started (the compute stream waits for it),
	// an offload whose host copy or device memory was needed (the host
	// waits). Synchronous backends never stall: their moves are complete
	// when issued. On a GPU it is an upper bound: "in flight" is asked
	// when the host reaches the operator, usually well ahead of the GPU,
	// so an upload that completes before the operator's kernels run still
	// counts.
	Stalls int
	// Revived counts offloads taken back while still in flight because the
	// chunk was needed again (its device copy was still there).
	Revived int
	// CleanDrops counts payload evictions that moved nothing: the host
	// still held the values the payload was uploaded from (not in Moves).
	CleanDrops int
	// GradOffloads counts reduced gradient shards sent to host memory
	// through the mover (not chunk moves: no MoveEvent).
	GradOffloads int
	// WriteBacks counts updated host master weights uploaded into device
	// parameter chunks through the mover (not chunk moves: no MoveEvent).
	WriteBacks int
}

var _ engine.Trainer = (*Gemini)(nil)

// New packs m's parameters into chunks, shards and places them, frees the
// model's own weight and gradient tensors (the chunks hold them from now
// on) and installs the hooks. The model must be built in cfg.Precision.
// Rank 0's initial weights are broadcast, as DDP does. host is the host
// tier: the backend that holds offloaded chunks and runs HybridAdam's host
// half (the CPU backend; passed in so that Gemini opens no backend itself).
func New(dev, host kernels.Backend, dc comm.DeviceCommunicator, m *model.ResNet, cfg Config) (*Gemini, error) {
	if err := cfg.normalise(); err != nil {
		return nil, err
	}
	if m.Cfg.DType != cfg.Precision {
		return nil, fmt.Errorf("gemini: model is %s but the run is %s", m.Cfg.DType, cfg.Precision)
	}
	g := &Gemini{cfg: cfg, dev: dev, host: host, comm: dc, world: dc.WorldSize(), rank: dc.Rank(),
		m: m, params: m.Params(), byParam: map[*model.Param]*tensorInfo{}, mv: kernels.MoverOf(dev)}
	g.usePinned()
	pk, err := pack(g.params, chunkCapacities(g.params, cfg.ChunkElems, g.world))
	if err != nil {
		return nil, err
	}
	g.chunks, g.tensors = pk.chunks, pk.tensors
	for _, t := range g.tensors {
		g.byParam[t.p] = t
	}
	g.shardChunks()
	g.placeInitial()
	if err := g.materialise(g.takeInitialWeights()); err != nil {
		return nil, err
	}
	g.flag = g.alloc(Device, kernels.CatWorkspace, kernels.F32, 1)
	g.ce = model.NewCrossEntropy(dev)
	g.tail = engine.NewTail(dev, dc, m, cfg.Precision, cfg.Scaler, g.flag, "gemini: ")
	m.SetHooks(g)
	dev.ResetPeak()
	g.emitChunks()
	return g, nil
}

// adopter is a host backend that wraps memory it did not allocate as a
// tensor (the CPU backend's Adopt).
type adopter interface {
	Adopt(cat kernels.Category, dt kernels.DType, host []float32, shape ...int) *kernels.Tensor
}

// usePinned makes host tensors pinned memory when the device backend has
// some and the host backend can adopt it.
func (g *Gemini) usePinned() {
	p, ok := g.dev.(kernels.PinnedHost)
	a, ok2 := g.host.(adopter)
	if ok && ok2 {
		g.pin, g.hostAdopt, g.pinned = p, a, map[*kernels.Tensor]bool{}
	}
	g.early.be, _ = g.host.(adamTo)
}

// shardChunks marks chunks sharded: with more than one rank, all but the
// first chunks that make up (1-ShardParamFrac) of the bytes.
func (g *Gemini) shardChunks() {
	var total int64
	for _, c := range g.chunks {
		total += c.payloadBytes()
	}
	keep := int64(float64(total) * (1 - g.cfg.ShardParamFrac))
	var kept int64
	for _, c := range g.chunks {
		c.shardLen = c.size
		if g.world > 1 && kept >= keep {
			c.sharded = true
			c.shardLen = c.size / g.world
			c.ownOff = g.rank * c.shardLen
			continue
		}
		kept += c.payloadBytes()
	}
}

// takeInitialWeights downloads every parameter into its chunk's full host
// image, frees the model's own weight and gradient tensors, and broadcasts
// rank 0's images. It returns one image per chunk.
func (g *Gemini) takeInitialWeights() [][]float32 {
	full := make([][]float32, len(g.chunks))
	for i, c := range g.chunks {
		full[i] = make([]float32, c.size)
	}
	for _, t := range g.tensors {
		g.dev.Download(t.p.W, full[t.c.id][t.off:t.off+t.n])
		g.dev.Free(t.p.W)
		g.dev.Free(t.p.G)
		t.p.W, t.p.G = nil, nil
	}
	return full
}

// materialise broadcasts the initial chunk images from rank 0 and creates
// every chunk's persistent parts where placeInitial put them.
func (g *Gemini) materialise(full [][]float32) error {
	for i, c := range g.chunks {
		if g.world > 1 {
			tmp := g.alloc(Device, kernels.CatWorkspace, kernels.F32, c.size)
			g.dev.Upload(tmp, full[i])
			err := g.comm.Broadcast(tmp, 0)
			g.dev.Download(tmp, full[i])
			g.release(Device, tmp)
			if err != nil {
				return fmt.Errorf("gemini: broadcast of chunk %d's initial weights: %w", c.id, err)
			}
		}
		own := full[i][c.ownOff : c.ownOff+c.shardLen]
		o := &c.opt
		o.master = g.alloc(o.on, kernels.CatOptState, kernels.F32, c.shardLen)
		g.backend(o.on).Upload(o.master, own)
		o.m = g.alloc(o.on, kernels.CatOptState, kernels.F32, c.shardLen)
		o.v = g.alloc(o.on, kernels.CatOptState, kernels.F32, c.shardLen)
		s := &c.payload
		if c.sharded {
			s = &c.shard
		}
		s.t = g.alloc(s.on, kernels.CatParams, c.dt, c.shardLen)
		g.backend(s.on).Upload(s.t, own)
		if !c.sharded {
			for _, t := range c.tensors {
				g.transition(t, Hold)
			}
		}
	}
	return nil
}

// Model is the wrapped model. Its parameters are views of chunk buffers,
// bound by the hooks around every use.
func (g *Gemini) Model() *model.ResNet { return g.m }

// Scaler is the loss scaler (nil for bf16).
func (g *Gemini) Scaler() *engine.LossScaler { return g.tail.Scaler }

// HostMemStats is the host memory accounting of the chunks kept there
// (the TUI's host memory pane).
func (g *Gemini) HostMemStats() kernels.MemStats { return g.host.MemStats() }

// HostPinnedBytes is the part of the host tier in pinned memory (all of
// it on a GPU with pinned memory, none on the CPU).
func (g *Gemini) HostPinnedBytes() int64 { return g.pinnedBytes }

// Stats returns the counters.
func (g *Gemini) Stats() Stats { return g.stats }

// Chunks describes every chunk of this rank.
func (g *Gemini) Chunks() []ChunkInfo {
	out := make([]ChunkInfo, len(g.chunks))
	for i, c := range g.chunks {
		ci := ChunkInfo{ID: c.id, DType: c.dt, Elems: c.size, Used: c.used, Bytes: c.payloadBytes(),
			Sharded: c.sharded, Payload: c.payload.on, Shard: c.shard.on, Optim: c.opt.on}
		for _, t := range c.tensors {
			ci.States[t.state]++
		}
		out[i] = ci
	}
	return out
}

func (g *Gemini) emitChunks() {
	if g.cfg.OnEvent != nil {
		g.cfg.OnEvent(ChunksEvent{Rank: g.rank, Step: g.calls, Chunks: g.Chunks()})
	}
}

// Free releases every chunk and buffer and removes the hooks (the model's
// parameters then point at freed storage; free the model next).
func (g *Gemini) Free() {
	g.m.SetHooks(nil)
	g.settleAll()
	for _, c := range g.chunks {
		g.freeSlot(&c.payload)
		g.freeSlot(&c.shard)
		g.freeSlot(&c.grad)
		o := &c.opt
		for _, t := range []*kernels.Tensor{o.master, o.m, o.v, o.g} {
			g.release(o.on, t)
		}
		g.release(Host, o.spareG)
		g.releaseNext(c)
		c.opt = optGroup{}
	}
	g.release(Device, g.flag)
	g.flag = nil
	g.ce.Free()
}
