package engine

import (
	"fmt"

	"resnetlab/comm"
	"resnetlab/kernels"
	"resnetlab/model"
)

// Plugin names, as ColossalAI's Booster plugins: the one place they are
// spelled. This engine trains the first three (torch_ddp_fp16 is torch_ddp
// in fp16); package gemini trains the last.
const (
	TorchDDP     = "torch_ddp"
	TorchDDPFP16 = "torch_ddp_fp16"
	LowLevelZero = "low_level_zero"
	Gemini       = "gemini"
)

// DefaultBucketElems is DDP's default bucket: 25 MB of fp32 gradients.
const DefaultBucketElems = 25 << 20 / 4

// EngineConfig selects how one rank trains.
type EngineConfig struct {
	Plugin      string        // TorchDDP or LowLevelZero
	Precision   kernels.DType // F32, or F16/BF16 for mixed precision with fp32 master weights
	ZeroStage   int           // 1 or 2 (LowLevelZero)
	Scaler      ScalerConfig  // loss scaling, used for F16 only (bf16 needs none)
	BucketElems int           // gradient bucket size in elements (0 = DefaultBucketElems)
	// NoOverlap reduces every gradient bucket after backward instead of as
	// soon as the bucket is complete during backward (see grads.go). The
	// results are the same bit for bit; it is there to compare and debug.
	NoOverlap bool
	// NoDirect keeps mixed-precision DDP on one rank on the general path:
	// gradients gathered into the flat fp32 buffer, Adam on it, weights cast
	// back afterwards. By default such a rank lets Adam read the model's own
	// gradients and write its low-precision weights (direct.go). Same
	// results bit for bit; it is there to compare and debug.
	NoDirect bool
	// Graphs replays the compute part of each step (forward, loss,
	// backward) as a captured graph (graph.go): one rank, a backend that
	// implements kernels.Capturer, one micro-batch per step. GraphWarmup
	// is the eager steps before a capture (0 = DefaultGraphWarmup).
	Graphs      bool
	GraphWarmup int
}

// StepStats is what one training step reports.
type StepStats struct {
	Loss      float32
	Skipped   bool    // gradients overflowed: no update (mixed precision)
	LossScale float64 // 0 without a loss scaler
}

// Engine is one rank's boosted model and optimizer (ColossalAI's
// booster.boost result): DDP keeps full fp32 master weights and Adam state
// on every rank; ZeRO (low_level_zero) keeps only this rank's shard of them.
// Every rank must call Step, State and LoadState together: they run
// collectives.
type Engine struct {
	cfg    EngineConfig
	be     kernels.Backend
	comm   comm.DeviceCommunicator
	model  *model.ResNet
	params []*model.Param
	lay    *layout
	ce     *model.CrossEntropy
	tail   Tail // overflow vote, scaler, Adam's step, buffer broadcast

	sharded bool
	direct  *direct           // mixed-precision DDP: per-parameter Adam (direct.go); nil otherwise
	master  *kernels.Tensor   // fp32 master weights: full (DDP) or this rank's shard (ZeRO)
	grad    *kernels.Tensor   // fp32 gradients: full (DDP, ZeRO-1) or shard (ZeRO-2)
	stages  []*kernels.Tensor // buckets of staging (ZeRO-2): two with async overlap, else one
	m, v    *kernels.Tensor   // Adam moments, shaped like master
	acc     *kernels.Tensor   // gradient accumulation side buffer (on first use)
	owned   []*kernels.Tensor // keep-alive list of tensors to Free

	// Gradient reduction during backward (grads.go, reducer.go).
	red           *reducer // the model's hooks; nil with NoOverlap
	async         bool     // collectives run on a comm goroutine (CPU ranks)
	micro, nMicro int      // the micro-batch being back-propagated, of how many
	queue         *commQueue
	stepErr       error        // first error of an inline collective in this step
	stageJob      []*bucketJob // the last collective that read each stage
	nextStage     int
	trace         func(ev string) // test hook, see reducer.trace

	graph *stepGraph // with EngineConfig.Graphs
}

// NewEngine wraps a rank's model. The model must be built with
// cfg.Precision as its DType. Rank 0's initial weights are broadcast so all
// ranks start equal, as DDP does. Unless cfg.NoOverlap, the engine takes
// the model's hooks (model.SetHooks) to reduce gradient buckets during
// backward; Free gives them back (nil).
func NewEngine(be kernels.Backend, dc comm.DeviceCommunicator, m *model.ResNet, cfg EngineConfig) (*Engine, error) {
	switch cfg.Plugin {
	case TorchDDP:
	case LowLevelZero:
		if cfg.Precision == kernels.F32 {
			return nil, fmt.Errorf("low_level_zero trains in fp16 or bf16 with fp32 master weights, not fp32")
		}
		if cfg.ZeroStage != 1 && cfg.ZeroStage != 2 {
			return nil, fmt.Errorf("low_level_zero: stage %d is not supported (want 1 or 2)", cfg.ZeroStage)
		}
	default:
		return nil, fmt.Errorf("parallel: unknown plugin %q for this engine", cfg.Plugin)
	}
	if m.Cfg.DType != cfg.Precision {
		return nil, fmt.Errorf("parallel: model is %s but the run is %s", m.Cfg.DType, cfg.Precision)
	}
	if cfg.BucketElems <= 0 {
		cfg.BucketElems = DefaultBucketElems
	}
	e := &Engine{cfg: cfg, be: be, comm: dc, model: m, params: m.Params(), ce: model.NewCrossEntropy(be)}
	e.sharded = cfg.Plugin == LowLevelZero
	e.lay = newLayout(e.params, dc.WorldSize(), dc.Rank(), cfg.BucketElems)
	if !cfg.NoOverlap {
		// Only host collectives may leave the rank's goroutine; device
		// backends are bound to the rank's thread.
		_, e.async = dc.(*comm.HostTensorComm)
		e.red = newReducer(e.params, e.lay, e.bucketReady)
	}
	if cfg.Graphs {
		var err error
		if e.graph, err = e.newStepGraph(); err != nil {
			return nil, err
		}
	}
	if err := e.allocate(); err != nil {
		return nil, err
	}
	if e.red != nil {
		m.SetHooks(e.red)
	}
	return e, nil
}

func (e *Engine) alloc(cat kernels.Category, n int) *kernels.Tensor {
	t := e.be.New(cat, kernels.F32, n)
	e.owned = append(e.owned, t)
	return t
}

// allocate builds the flat buffers and the starting master weights.
func (e *Engine) allocate() error {
	l := e.lay
	stateLen := l.padded()
	if e.sharded {
		stateLen = l.shardLen()
	}
	e.master = e.alloc(kernels.CatParams, stateLen)
	e.m = e.alloc(kernels.CatOptState, stateLen)
	e.v = e.alloc(kernels.CatOptState, stateLen)
	e.tail = NewTail(e.be, e.comm, e.model, e.cfg.Precision, e.cfg.Scaler, e.alloc(kernels.CatWorkspace, 1), "")
	if e.zero2() {
		e.grad = e.alloc(kernels.CatGrads, l.shardLen())
		e.stages = []*kernels.Tensor{e.alloc(kernels.CatWorkspace, l.bucketLen())}
		if e.async && l.buckets > 1 {
			e.stages = append(e.stages, e.alloc(kernels.CatWorkspace, l.bucketLen()))
		}
		e.stageJob = make([]*bucketJob, len(e.stages))
	} else {
		e.grad = e.alloc(kernels.CatGrads, l.padded())
	}
	full := e.be.New(kernels.CatWorkspace, kernels.F32, l.padded())
	defer e.be.Free(full)
	l.gather(e.be, e.params, weights, full, 0, l.padded())
	if err := e.comm.Broadcast(full, 0); err != nil {
		return fmt.Errorf("broadcast of initial weights: %w", err)
	}
	e.setMasterFromFull(full)
	if e.cfg.Precision == kernels.F32 {
		e.bindFP32()
	} else {
		l.scatter(e.be, e.params, weights, full, 0, l.padded())
		if !e.sharded {
			e.direct = e.newDirect()
		}
	}
	return nil
}

// setMasterFromFull copies a full flat fp32 vector into the master weights.
func (e *Engine) setMasterFromFull(full *kernels.Tensor) {
	if !e.sharded {
		e.be.Copy(e.master, full)
		return
	}
	l := e.lay
	for k := 0; k < l.buckets; k++ {
		e.be.Copy(kernels.View(e.master, k*l.block, l.block), kernels.View(full, l.owned(k), l.block))
	}
}

// bindFP32 points an fp32 model's weights and gradients at views of the
// flat master and gradient buffers, so DDP needs no copies at all.
func (e *Engine) bindFP32() {
	for i, p := range e.params {
		off, shape := e.lay.offs[i], p.W.Shape
		oldW, oldG := p.W, p.G
		p.W = kernels.View(e.master, off, shape...)
		p.G = kernels.View(e.grad, off, shape...)
		e.be.Free(oldW)
		if oldG != nil {
			e.be.Free(oldG)
		}
	}
}

// Model is the wrapped model (for evaluation).
func (e *Engine) Model() *model.ResNet { return e.model }

// Scaler is the loss scaler, nil without one.
func (e *Engine) Scaler() *LossScaler { return e.tail.Scaler }

// Steps is the number of optimizer updates taken.
func (e *Engine) Steps() int { return e.tail.Steps }

// Batch is one micro-batch: images [N,C,32,32] in the model's dtype and
// labels [N] (class indices as fp32).
type Batch struct{ X, Labels *kernels.Tensor }

// Step runs forward, backward, gradient reduction and the Adam update on
// one batch.
func (e *Engine) Step(x, labels *kernels.Tensor, lr float32) (StepStats, error) {
	return e.StepAccum([]Batch{{x, labels}}, lr)
}

// StepAccum is one optimizer step over several micro-batches whose
// gradients are averaged (gradient accumulation): with k micro-batches of
// B it equals one batch of k*B up to rounding, batch-norm statistics aside
// (they are per micro-batch, as they are per rank under DDP).
func (e *Engine) StepAccum(micro []Batch, lr float32) (StepStats, error) {
	if len(micro) > 1 && e.zero2() {
		return StepStats{}, fmt.Errorf("gradient accumulation needs ZeRO stage 1 (stage 2 keeps no full gradient)")
	}
	scale := e.tail.Scale()
	var st StepStats
	if e.tail.Scaler != nil {
		st.LossScale = e.tail.Scaler.Scale
	}
	e.setDirect(len(micro))
	var err error
	if st.Loss, err = e.compute(micro, scale); err != nil {
		return st, err
	}
	return e.update(st, len(micro), lr, scale)
}

// compute runs forward, loss and backward of every micro-batch (graph.go:
// replayed from a graph when the engine has one) and returns the mean loss
// of all but the last micro-batch, which update reads.
func (e *Engine) compute(micro []Batch, scale float32) (float32, error) {
	if e.graph == nil || len(micro) != 1 {
		return e.forwardBackward(micro, scale)
	}
	ranGo, err := e.graph.run(micro[0], scale, func() error {
		_, err := e.forwardBackward(micro, scale)
		return err
	})
	if !ranGo { // a plain replay: the forward's Go bookkeeping did not run
		e.model.CountTrainBatch()
	}
	return 0, err
}

// update is the eager part of a step: the last loss and the overflow
// check in one read, the loss scaler, Adam and publishing the weights.
func (e *Engine) update(st StepStats, n int, lr, scale float32) (StepStats, error) {
	last, overflow, err := e.lastLoss()
	st.Loss += last / float32(n)
	if err != nil {
		return st, err
	}
	st.Skipped = overflow
	return st, e.tail.Finish(overflow, lr, scale, func(hp kernels.AdamParams) error {
		e.adam(hp)
		return e.publish()
	}, nil)
}

// lastLoss reads the last micro-batch's loss; mixed precision brings the
// all-ranks overflow vote with it (one wait for the device per step).
func (e *Engine) lastLoss() (float32, bool, error) {
	if e.cfg.Precision == kernels.F32 {
		return e.ce.Value(), false, nil
	}
	return e.overflow()
}

// forwardBackward runs every micro-batch, reducing each gradient bucket as
// it completes, and waits for the reductions; it returns the loss summed
// over all but the last micro-batch, divided by their count.
func (e *Engine) forwardBackward(micro []Batch, scale float32) (float32, error) {
	defer e.abandonReduction() // a no-op unless backward panicked
	loss := float32(0)
	for i, b := range micro {
		logits := e.model.Forward(b.X, true)
		_, dlogits := e.ce.Forward(logits, b.Labels, scale/float32(len(micro)), true)
		e.backward(dlogits, i, len(micro))
		if i < len(micro)-1 { // the last one update reads
			loss += e.ce.Value() / float32(len(micro))
		}
	}
	return loss, e.finishReduction()
}

// overflow returns the last loss and votes over all ranks whether any
// gradient is inf or NaN.
func (e *Engine) overflow() (float32, bool, error) {
	loss, bad := kernels.LossAndNonFinite(e.be, e.ce.Loss(), e.checkedGrads())
	bad, err := e.tail.Vote(bad)
	return loss, bad, err
}

// span is a range of the state this rank's Adam updates: n elements at
// offset state of master, m and v, and at offset grad of the gradient buffer.
type span struct{ state, grad, n int }

// ownedSpans are the ranges this rank's Adam updates: the whole state for
// DDP, this rank's block of every bucket for ZeRO. The padding after the
// last parameter (the last bucket is rarely full: 1.9 M of ResNet-18's
// 13.1 M flat elements at 25 MB buckets) is left out: its weights,
// gradients and moments are zeros and stay zeros, so skipping it changes
// no bit and saves Adam and the overflow check that much traffic.
func (e *Engine) ownedSpans() []span {
	l := e.lay
	if !e.sharded {
		return []span{{0, 0, l.n}}
	}
	var ss []span
	for k := 0; k < l.buckets; k++ {
		n := min(l.block, l.n-l.owned(k))
		if n <= 0 {
			continue // this rank's block of the last bucket is all padding
		}
		g := l.owned(k)
		if e.zero2() {
			g = k * l.block // ZeRO-2 keeps only the owned blocks of the gradients
		}
		ss = append(ss, span{state: k * l.block, grad: g, n: n})
	}
	return ss
}

// ownedGrads are the gradient views that this rank's Adam reads.
func (e *Engine) ownedGrads() []*kernels.Tensor {
	var gs []*kernels.Tensor
	for _, s := range e.ownedSpans() {
		gs = append(gs, kernels.View(e.grad, s.grad, s.n))
	}
	return gs
}

// adam updates the master weights this rank owns in one fused call.
func (e *Engine) adam(hp kernels.AdamParams) {
	if e.direct != nil {
		e.direct.adam(e.be, hp)
		return
	}
	var ps, gs, ms, vs []*kernels.Tensor
	for _, s := range e.ownedSpans() {
		ps = append(ps, kernels.View(e.master, s.state, s.n))
		gs = append(gs, kernels.View(e.grad, s.grad, s.n))
		ms = append(ms, kernels.View(e.m, s.state, s.n))
		vs = append(vs, kernels.View(e.v, s.state, s.n))
	}
	e.be.AdamStep(ps, gs, ms, vs, hp)
}

// publish brings the updated master weights into the model: nothing for
// fp32 DDP (its weights are views of master), a cast for mixed-precision
// DDP, an all-gather of the shards for ZeRO.
func (e *Engine) publish() error {
	l := e.lay
	switch {
	case !e.sharded: // fp32: views of master; mixed: Adam wrote the weights
		return nil
	}
	for k := 0; k < l.buckets; k++ {
		lo, hi := l.bucket(k)
		var dst *kernels.Tensor
		if e.zero2() {
			dst = e.stages[0]
		} else { // ZeRO-1: the full gradient buffer is free again
			dst = kernels.View(e.grad, lo, hi-lo)
		}
		if err := e.comm.AllGather(dst, kernels.View(e.master, k*l.block, l.block)); err != nil {
			return fmt.Errorf("all-gather of updated bucket %d: %w", k, err)
		}
		l.scatter(e.be, e.params, weights, dst, lo, hi)
	}
	return nil
}

// Free releases the engine's buffers (not the model).
func (e *Engine) Free() {
	if e.graph != nil {
		e.graph.drop(false)
	}
	if e.red != nil {
		e.model.SetHooks(nil)
		e.red = nil
	}
	for _, t := range e.owned {
		e.be.Free(t)
	}
	e.owned = nil
	e.ce.Free()
}

// Trainer is one rank's boosted model and optimizer, whatever the plugin:
// Engine (DDP, ZeRO) and gemini.Gemini implement it. Step, State and
// LoadState are collectives.
type Trainer interface {
	Step(x, labels *kernels.Tensor, lr float32) (StepStats, error)
	Model() *model.ResNet
	State() (*State, error)
	LoadState(st *State) error
	Free()
}

var _ Trainer = (*Engine)(nil)
