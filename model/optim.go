package model

import (
	"errors"
	"fmt"
	"slices"

	"resnetlab/kernels"
)

// Adam is ColossalAI's HybridAdam in adamw_mode: Adam with bias correction
// and decoupled weight decay. Its state (exp_avg m and exp_avg_sq v, fp32,
// one pair per parameter) is allocated on the first Step.
type Adam struct {
	Beta1, Beta2, Eps, WeightDecay float32
	StepCount                      int // steps taken so far (PyTorch's "step")

	be     kernels.Backend
	m, v   []*kernels.Tensor
	ws, gs []*kernels.Tensor // reused argument slices
}

// NewAdam returns Adam with HybridAdam's defaults: betas (0.9, 0.999), eps
// 1e-8, weight decay 0.
func NewAdam() *Adam {
	return &Adam{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// Step applies one update to params with learning rate lr; gradients are
// multiplied by gradScale first (1/lossScale under loss scaling). params
// must be the same list, in the same order, at every call.
func (a *Adam) Step(be kernels.Backend, params []*Param, lr, gradScale float32) {
	a.ensureState(be, params)
	a.StepCount++
	a.ws, a.gs = a.ws[:0], a.gs[:0]
	for _, p := range params {
		a.ws = append(a.ws, p.W)
		a.gs = append(a.gs, p.G)
	}
	be.AdamStep(a.ws, a.gs, a.m, a.v, kernels.AdamParams{
		LR: lr, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps, WeightDecay: a.WeightDecay,
		Step: a.StepCount, GradScale: gradScale,
	})
}

// ensureState allocates zero m and v shaped like each parameter.
func (a *Adam) ensureState(be kernels.Backend, params []*Param) {
	if a.m != nil {
		if len(a.m) != len(params) {
			panic(fmt.Sprintf("model: Adam state holds %d tensors, Step got %d params", len(a.m), len(params)))
		}
		return
	}
	a.be = be
	for _, p := range params {
		a.m = append(a.m, be.New(kernels.CatOptState, kernels.F32, p.W.Shape...))
		a.v = append(a.v, be.New(kernels.CatOptState, kernels.F32, p.W.Shape...))
	}
}

// Moments returns the exp_avg and exp_avg_sq tensors (nil before the first
// Step or LoadState).
func (a *Adam) Moments() (m, v []*kernels.Tensor) { return a.m, a.v }

// Free releases the optimizer state; the next Step starts from zero moments
// but keeps StepCount.
func (a *Adam) Free() {
	for i := range a.m {
		a.be.Free(a.m[i])
		a.be.Free(a.v[i])
	}
	a.m, a.v = nil, nil
}

// State copies the optimizer to host memory as PyTorch names it:
// "step" (int64 scalar), then "state.{i}.exp_avg" and "state.{i}.exp_avg_sq"
// for every parameter index i.
func (a *Adam) State() []NamedTensor {
	out := []NamedTensor{{Name: "step", Shape: []int{}, Int64: []int64{int64(a.StepCount)}}}
	for i := range a.m {
		for j, t := range []*kernels.Tensor{a.m[i], a.v[i]} {
			nt := NamedTensor{Name: momentName(i, j), Shape: slices.Clone(t.Shape), Data: make([]float32, t.Len())}
			a.be.Download(t, nt.Data)
			out = append(out, nt)
		}
	}
	return out
}

func momentName(i, j int) string {
	if j == 0 {
		return fmt.Sprintf("state.%d.exp_avg", i)
	}
	return fmt.Sprintf("state.%d.exp_avg_sq", i)
}

// LoadState restores State's output for params (the list later passed to
// Step). A state with step 0 and no moments is accepted (fresh optimizer).
// Nothing changes unless every entry matches.
func (a *Adam) LoadState(be kernels.Backend, params []*Param, st []NamedTensor) error {
	byName := make(map[string]NamedTensor, len(st))
	for _, nt := range st {
		byName[nt.Name] = nt
	}
	step, ok := byName["step"]
	if !ok || len(step.Int64) != 1 || step.Int64[0] < 0 {
		return errors.New(`model: optimizer state: missing or invalid "step" (want one non-negative int64)`)
	}
	want := 1
	if step.Int64[0] > 0 || len(st) > 1 {
		want += 2 * len(params)
		if err := checkMoments(byName, params); err != nil {
			return err
		}
	}
	if len(st) != want {
		return fmt.Errorf("model: optimizer state: %d entries, want %d (step + 2 per each of %d params)", len(st), want, len(params))
	}
	if a.m != nil {
		a.Free()
	}
	a.StepCount = int(step.Int64[0])
	if want == 1 {
		return nil
	}
	a.ensureState(be, params)
	for i := range params {
		be.Upload(a.m[i], byName[momentName(i, 0)].Data)
		be.Upload(a.v[i], byName[momentName(i, 1)].Data)
	}
	return nil
}

// checkMoments verifies exp_avg/exp_avg_sq exist for each param with its shape.
func checkMoments(byName map[string]NamedTensor, params []*Param) error {
	for i, p := range params {
		for j := range 2 {
			name := momentName(i, j)
			nt, ok := byName[name]
			switch {
			case !ok:
				return fmt.Errorf("model: optimizer state: missing %q (param %s)", name, p.Name)
			case !slices.Equal(nt.Shape, p.W.Shape) || len(nt.Data) != p.W.Len():
				return fmt.Errorf("model: optimizer state: %q has shape %v (%d values), param %s has %v",
					name, nt.Shape, len(nt.Data), p.Name, p.W.Shape)
			}
		}
	}
	return nil
}
