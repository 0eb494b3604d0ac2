package engine

import (
	"fmt"

	"resnetlab/kernels"
	"resnetlab/model"
)

// State is a rank-independent snapshot of training: the model's state dict
// (parameters as fp32 master weights), Adam's moments per parameter and the
// step counters. It is the same on every rank and for every world size, so
// a checkpoint written by N ranks resumes on M.
type State struct {
	Model    []model.NamedTensor
	ExpAvg   [][]float32 // per parameter, state-dict order of parameters
	ExpAvgSq [][]float32
	Step     int
	Scaler   *LossScaler // nil without loss scaling
}

// State gathers the full state (a collective: every rank calls it).
func (e *Engine) State() (*State, error) {
	master, err := e.fullHost(e.master)
	if err != nil {
		return nil, err
	}
	m, err := e.fullHost(e.m)
	if err != nil {
		return nil, err
	}
	v, err := e.fullHost(e.v)
	if err != nil {
		return nil, err
	}
	st := &State{Model: e.model.StateDict(), Step: e.tail.Steps}
	byName := map[string]int{}
	for i, p := range e.params {
		byName[p.Name] = i
	}
	for j := range st.Model {
		if i, ok := byName[st.Model[j].Name]; ok { // master values, not fp16-rounded ones
			off := e.lay.offs[i]
			copy(st.Model[j].Data, master[off:off+len(st.Model[j].Data)])
		}
	}
	for i, p := range e.params {
		off, n := e.lay.offs[i], p.W.Len()
		st.ExpAvg = append(st.ExpAvg, m[off:off+n:off+n])
		st.ExpAvgSq = append(st.ExpAvgSq, v[off:off+n:off+n])
	}
	if sc := e.tail.Scaler; sc != nil {
		s := *sc
		st.Scaler = &s
	}
	return st, nil
}

// fullHost returns the full flat vector of a master-shaped buffer on the host.
func (e *Engine) fullHost(t *kernels.Tensor) ([]float32, error) {
	l := e.lay
	out := make([]float32, l.padded())
	if !e.sharded {
		e.be.Download(t, out)
		return out, nil
	}
	full := e.be.New(kernels.CatWorkspace, kernels.F32, l.padded())
	defer e.be.Free(full)
	for k := 0; k < l.buckets; k++ {
		lo, hi := l.bucket(k)
		if err := e.comm.AllGather(kernels.View(full, lo, hi-lo), kernels.View(t, k*l.block, l.block)); err != nil {
			return nil, fmt.Errorf("gathering state bucket %d: %w", k, err)
		}
	}
	e.be.Download(full, out)
	return out, nil
}

// LoadState restores a State taken by any world size. Model entries load
// first (they are validated by name and shape); the optimizer part must
// match the model's parameters.
func (e *Engine) LoadState(st *State) error {
	e.DropGraph()
	if err := e.model.LoadStateDict(st.Model); err != nil {
		return err
	}
	l := e.lay
	if st.ExpAvg != nil && (len(st.ExpAvg) != len(e.params) || len(st.ExpAvgSq) != len(e.params)) {
		return fmt.Errorf("optimizer state has %d/%d moment tensors, the model has %d parameters",
			len(st.ExpAvg), len(st.ExpAvgSq), len(e.params))
	}
	master := make([]float32, l.padded())
	m := make([]float32, l.padded())
	v := make([]float32, l.padded())
	byName := map[string][]float32{}
	for _, nt := range st.Model {
		byName[nt.Name] = nt.Data
	}
	for i, p := range e.params {
		off, n := l.offs[i], p.W.Len()
		copy(master[off:off+n], byName[p.Name])
		if st.ExpAvg == nil {
			continue
		}
		if len(st.ExpAvg[i]) != n || len(st.ExpAvgSq[i]) != n {
			return fmt.Errorf("optimizer state for %s has %d/%d values, want %d",
				p.Name, len(st.ExpAvg[i]), len(st.ExpAvgSq[i]), n)
		}
		copy(m[off:off+n], st.ExpAvg[i])
		copy(v[off:off+n], st.ExpAvgSq[i])
	}
	e.loadFull(e.master, master)
	e.loadFull(e.m, m)
	e.loadFull(e.v, v)
	if e.cfg.Precision != kernels.F32 {
		full := e.be.New(kernels.CatWorkspace, kernels.F32, l.padded())
		e.be.Upload(full, master)
		l.scatter(e.be, e.params, weights, full, 0, l.padded())
		e.be.Free(full)
	}
	e.tail.Steps = st.Step
	if sc := e.tail.Scaler; sc != nil && st.Scaler != nil {
		cfg := sc.Cfg
		*sc = *st.Scaler
		sc.Cfg = cfg
	}
	return nil
}

// loadFull sets a master-shaped buffer from a full host vector.
func (e *Engine) loadFull(t *kernels.Tensor, full []float32) {
	if !e.sharded {
		e.be.Upload(t, full)
		return
	}
	l := e.lay
	shard := make([]float32, l.shardLen())
	for k := 0; k < l.buckets; k++ {
		copy(shard[k*l.block:(k+1)*l.block], full[l.owned(k):l.owned(k)+l.block])
	}
	e.be.Upload(t, shard)
}
