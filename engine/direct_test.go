package engine

import (
	"math"
	"testing"

	"resnetlab/comm"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

// stepLog trains one rank of DDP in precision dt for the given batches (an
// inf in batch inf's input, if inf >= 0) and returns the step stats, the
// final state and the model's low-precision weights as they are on the
// backend (not the masters State reports).
func stepLog(t *testing.T, dt kernels.DType, noDirect bool, steps, inf int) ([]StepStats, *State, [][]float32) {
	t.Helper()
	be := cpu.New()
	m := model.NewResNet18(be, model.Config{Width: testWidth, InChannels: 3, NumClasses: 10, DType: dt, Seed: 3})
	defer m.Free()
	cfg := EngineConfig{Plugin: TorchDDP, Precision: dt, BucketElems: 6000, NoDirect: noDirect,
		Scaler: ScalerConfig{InitialScale: 1024, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2, Hysteresis: 1}}
	g := comm.NewGroup(1)
	e, err := NewEngine(be, comm.NewHostTensorComm(g.Comm(0)), m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Free()
	var log []StepStats
	for s := 0; s < steps; s++ {
		b := batchOf(be, dt, 8, s, 0, 1)
		if s == inf {
			x := make([]float32, b.X.Len())
			be.Download(b.X, x)
			x[5] = float32(math.Inf(1))
			be.Upload(b.X, x)
		}
		st, err := e.Step(b.X, b.Labels, 2e-3)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, st)
	}
	st, err := e.State()
	if err != nil {
		t.Fatal(err)
	}
	var ws [][]float32
	for _, p := range m.Params() {
		w := make([]float32, p.W.Len())
		be.Download(p.W, w)
		ws = append(ws, w)
	}
	return log, st, ws
}

// Mixed-precision DDP on one rank lets Adam read the model's gradients and
// write its fp16/bf16 weights (direct.go); the general path gathers the
// gradients into the flat fp32 buffer and casts the weights after Adam.
// Both must agree bit for bit: losses, skipped steps, scale, masters, Adam
// moments and the model's own low-precision weights.
func TestDirectAdamMatchesGatherAndCast(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
		inf := -1
		if dt == kernels.F16 {
			inf = 2 // one skipped step on the way
		}
		dLog, dSt, dW := stepLog(t, dt, false, 5, inf)
		gLog, gSt, gW := stepLog(t, dt, true, 5, inf)
		for i := range dLog {
			a, b := dLog[i], gLog[i]
			if math.Float32bits(a.Loss) != math.Float32bits(b.Loss) || a.Skipped != b.Skipped || a.LossScale != b.LossScale {
				t.Errorf("%s step %d: direct %+v, gather %+v", dt, i, dLog[i], gLog[i])
			}
		}
		if dt == kernels.F16 && !dLog[2].Skipped {
			t.Errorf("fp16: the step with an inf input was not skipped: %+v", dLog[2])
		}
		// An inf input makes the running statistics NaN on both paths:
		// compare bits.
		for i, nt := range dSt.Model {
			for j, x := range nt.Data {
				if y := gSt.Model[i].Data[j]; math.Float32bits(x) != math.Float32bits(y) {
					t.Fatalf("%s: %s[%d] is %g direct, %g gather", dt, nt.Name, j, x, y)
				}
			}
		}
		for i := range dSt.ExpAvg {
			for j, x := range dSt.ExpAvg[i] {
				if gSt.ExpAvg[i][j] != x || gSt.ExpAvgSq[i][j] != dSt.ExpAvgSq[i][j] {
					t.Fatalf("%s: Adam state of param %d differs at %d", dt, i, j)
				}
			}
		}
		for i := range dW {
			for j, x := range dW[i] {
				if gW[i][j] != x {
					t.Fatalf("%s: model weight %d differs at %d: %g vs %g", dt, i, j, x, gW[i][j])
				}
			}
		}
		// The model's weights must be the masters rounded to dt, i.e. the
		// update did reach them (the comparison above can fail).
		if d, _ := paramDiff(dSt, stateOfInit(t, dt)); d == 0 || math.IsNaN(d) {
			t.Fatalf("%s: training changed nothing", dt)
		}
	}
}

// stateOfInit is the untrained state of stepLog's model.
func stateOfInit(t *testing.T, dt kernels.DType) *State {
	_, st, _ := stepLog(t, dt, false, 0, -1)
	return st
}

// opCounter counts the host-visible work of a step: copies, host reads,
// Adam calls, on a CPU backend that claims the fused interfaces (and runs
// them through the plain ops underneath).
type opCounter struct {
	kernels.Backend
	copies, downloads, nonFinite, adam, adamCopy, fused int
}

func (c *opCounter) Copy(dst, src *kernels.Tensor)           { c.copies++; c.Backend.Copy(dst, src) }
func (c *opCounter) Download(t *kernels.Tensor, d []float32) { c.downloads++; c.Backend.Download(t, d) }
func (c *opCounter) NonFinite(ts []*kernels.Tensor) bool {
	c.nonFinite++
	return c.Backend.NonFinite(ts)
}
func (c *opCounter) AdamStep(p, g, m, v []*kernels.Tensor, hp kernels.AdamParams) {
	c.adam++
	c.Backend.AdamStep(p, g, m, v, hp)
}
func (c *opCounter) AdamStepCopy(p, g, m, v, cp []*kernels.Tensor, hp kernels.AdamParams) {
	c.adamCopy++
	kernels.AdamStepCopy(c.Backend, p, g, m, v, cp, hp)
}
func (c *opCounter) LossAndNonFinite(loss *kernels.Tensor, ts []*kernels.Tensor) (float32, bool) {
	c.fused++
	return kernels.LossAndNonFinite(c.Backend, loss, ts)
}

// One mixed-precision step on one rank asks the device for nothing beyond
// forward and backward but one fused Adam and one fused loss+overflow read:
// no per-tensor copies, no separate download or NonFinite (the general
// path, NoDirect, copies every gradient in). fp32 keeps its one download.
func TestDirectStepIssuesNoCopies(t *testing.T) {
	for _, c := range []struct {
		dt       kernels.DType
		noDirect bool
		want     [6]int // copies, downloads, NonFinite, AdamStep, AdamStepCopy, LossAndNonFinite
	}{
		{kernels.F16, false, [6]int{0, 0, 0, 0, 1, 1}},
		{kernels.BF16, false, [6]int{0, 0, 0, 0, 1, 1}},
		{kernels.F16, true, [6]int{62, 0, 0, 0, 1, 1}}, // the gather of 62 gradients
		{kernels.F32, false, [6]int{0, 1, 0, 1, 0, 0}},
	} {
		be := &opCounter{Backend: cpu.New()}
		m := model.NewResNet18(be, model.Config{Width: testWidth, InChannels: 3, NumClasses: 10, DType: c.dt, Seed: 3})
		cfg := EngineConfig{Plugin: TorchDDP, Precision: c.dt, NoDirect: c.noDirect,
			Scaler: ScalerConfig{InitialScale: 1024, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 100, Hysteresis: 1}}
		e, err := NewEngine(be, comm.NewHostTensorComm(comm.NewGroup(1).Comm(0)), m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b := batchOf(be, c.dt, 4, 0, 0, 1)
		*be = opCounter{Backend: be.Backend}
		if _, err := e.Step(b.X, b.Labels, 1e-3); err != nil {
			t.Fatal(err)
		}
		got := [6]int{be.copies, be.downloads, be.nonFinite, be.adam, be.adamCopy, be.fused}
		if got != c.want {
			t.Errorf("%s (NoDirect %v) step: copies, downloads, NonFinite, AdamStep, AdamStepCopy, LossAndNonFinite = %v, want %v",
				c.dt, c.noDirect, got, c.want)
		}
		e.Free()
		m.Free()
	}
}
