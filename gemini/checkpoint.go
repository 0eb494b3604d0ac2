package gemini

import (
	"fmt"

	"resnetlab/engine"
	"resnetlab/kernels"
	"resnetlab/model"
)

// State gathers the full training state (a collective): the model's state
// dict with the fp32 master weights as parameter values, Adam's moments
// per parameter in parameter order, the step and the loss scaler. It is
// the same engine.State as the DDP/ZeRO engine's, independent of rank,
// world size, chunking and placement, so checkpoints interchange.
func (g *Gemini) State() (*engine.State, error) {
	g.settleAll()
	sd, err := g.withScratchParams(func() ([]model.NamedTensor, error) { return g.m.StateDict(), nil })
	if err != nil {
		return nil, err
	}
	st := &engine.State{Model: sd, Step: g.tail.Steps,
		ExpAvg: make([][]float32, len(g.params)), ExpAvgSq: make([][]float32, len(g.params))}
	byName := map[string]*tensorInfo{}
	for _, t := range g.tensors {
		byName[t.name] = t
	}
	full := make([][3][]float32, len(g.chunks))
	for i, c := range g.chunks {
		for j, t := range []*kernels.Tensor{c.opt.master, c.opt.m, c.opt.v} {
			if full[i][j], err = g.gatherFull(c, t); err != nil {
				return nil, err
			}
		}
	}
	for j := range st.Model {
		if t, ok := byName[st.Model[j].Name]; ok {
			copy(st.Model[j].Data, full[t.c.id][0][t.off:t.off+t.n])
		}
	}
	for _, t := range g.tensors {
		f := full[t.c.id]
		st.ExpAvg[t.idx] = f[1][t.off : t.off+t.n : t.off+t.n]
		st.ExpAvgSq[t.idx] = f[2][t.off : t.off+t.n : t.off+t.n]
	}
	if sc := g.tail.Scaler; sc != nil {
		s := *sc
		st.Scaler = &s
	}
	return st, nil
}

// gatherFull returns chunk c's full fp32 vector of which t (on the
// optimizer chunk's location) is this rank's shard.
func (g *Gemini) gatherFull(c *chunk, t *kernels.Tensor) ([]float32, error) {
	out := make([]float32, c.size)
	if !c.sharded {
		g.backend(c.opt.on).Download(t, out)
		return out, nil
	}
	g.makeRoom(-1, 4*int64(c.size), nil)
	tmp := g.alloc(Device, kernels.CatWorkspace, kernels.F32, c.size)
	defer g.release(Device, tmp)
	own := kernels.View(tmp, c.ownOff, c.shardLen)
	g.transfer(own, Device, t, c.opt.on)
	if err := g.comm.AllGather(tmp, own); err != nil {
		return nil, fmt.Errorf("gemini: gathering chunk %d's state: %w", c.id, err)
	}
	g.dev.Download(tmp, out)
	return out, nil
}

// withScratchParams runs fn (model.StateDict or LoadStateDict) with every
// parameter pointed at a view of one device scratch tensor: those
// functions walk the model's entries (batch-norm statistics included) in
// torchvision's order, but Gemini's parameter values live in chunks, which
// the callers read or write themselves.
func (g *Gemini) withScratchParams(fn func() ([]model.NamedTensor, error)) ([]model.NamedTensor, error) {
	largest := 0
	for _, t := range g.tensors {
		largest = max(largest, t.n)
	}
	g.makeRoom(-1, int64(largest)*int64(g.cfg.Precision.Size()), nil)
	scratch := g.alloc(Device, kernels.CatWorkspace, g.cfg.Precision, largest)
	saved := make([]*kernels.Tensor, len(g.tensors))
	for i, t := range g.tensors {
		saved[i] = t.p.W
		t.p.W = kernels.View(scratch, 0, t.shape...)
	}
	defer func() {
		for i, t := range g.tensors {
			t.p.W = saved[i]
		}
		g.release(Device, scratch)
	}()
	return fn()
}

// LoadState restores a State taken by any plugin and world size. The model
// entries are validated (names, shapes) before anything changes.
func (g *Gemini) LoadState(st *engine.State) error {
	g.settleAll()
	if _, err := g.withScratchParams(func() ([]model.NamedTensor, error) { return nil, g.m.LoadStateDict(st.Model) }); err != nil {
		return err
	}
	if st.ExpAvg != nil && (len(st.ExpAvg) != len(g.params) || len(st.ExpAvgSq) != len(g.params)) {
		return fmt.Errorf("gemini: optimizer state has %d/%d moment tensors, the model has %d parameters",
			len(st.ExpAvg), len(st.ExpAvgSq), len(g.params))
	}
	byName := map[string][]float32{}
	for _, nt := range st.Model {
		byName[nt.Name] = nt.Data
	}
	full := make([][3][]float32, len(g.chunks))
	for i, c := range g.chunks {
		for j := range 3 {
			full[i][j] = make([]float32, c.size)
		}
	}
	for _, t := range g.tensors {
		f := full[t.c.id]
		copy(f[0][t.off:t.off+t.n], byName[t.name])
		if st.ExpAvg == nil {
			continue
		}
		if len(st.ExpAvg[t.idx]) != t.n || len(st.ExpAvgSq[t.idx]) != t.n {
			return fmt.Errorf("gemini: optimizer state for %s has %d/%d values, want %d",
				t.name, len(st.ExpAvg[t.idx]), len(st.ExpAvgSq[t.idx]), t.n)
		}
		copy(f[1][t.off:t.off+t.n], st.ExpAvg[t.idx])
		copy(f[2][t.off:t.off+t.n], st.ExpAvgSq[t.idx])
	}
	for i, c := range g.chunks {
		g.loadChunk(c, full[i])
	}
	g.tail.Steps = st.Step
	if sc := g.tail.Scaler; sc != nil && st.Scaler != nil {
		cfg := sc.Cfg
		*sc = *st.Scaler
		sc.Cfg = cfg
	}
	return nil
}

// loadChunk sets c's optimizer shard and parameters from full images.
func (g *Gemini) loadChunk(c *chunk, full [3][]float32) {
	o := &c.opt
	be := g.backend(o.on)
	for j, t := range []*kernels.Tensor{o.master, o.m, o.v} {
		be.Upload(t, full[j][c.ownOff:c.ownOff+c.shardLen])
	}
	if c.sharded {
		g.afterUse(c) // drop a stale gathered payload
		g.backend(c.shard.on).Upload(c.shard.t, full[0][c.ownOff:c.ownOff+c.shardLen])
		return
	}
	g.ready(&c.payload)
	g.dirty(&c.payload)
	g.backend(c.payload.on).Upload(c.payload.t, full[0])
}
