package gemini

import (
	"testing"

	"resnetlab/engine"
	"resnetlab/kernels"
)

// Checkpoints interchange with the DDP/ZeRO engine: a state saved by
// either after two steps and resumed by the other for the third gives
// exactly the uninterrupted DDP run.
func TestStateInterchangesWithEngine(t *testing.T) {
	ddpCfg := engine.EngineConfig{Plugin: engine.TorchDDP, Precision: kernels.F16, Scaler: testScaler}
	full := budgetBase(2, Auto)
	ref := runEngine(t, full, ddpCfg)[0]
	budget := runGemini(t, full)[0].peak / 3

	first := full
	first.steps = 2
	first.gem.DeviceBudget = budget
	rest := full
	rest.from = 2

	// Gemini -> Engine.
	gemState := runGemini(t, first)[0].state
	rest.load = gemState
	if d := stateDiff(ref, runEngine(t, rest, ddpCfg)[1]); d != "" {
		t.Errorf("Gemini's checkpoint resumed by DDP differs from the uninterrupted run: %s", d)
	}
	// Engine -> Gemini (budgeted, sharded).
	rest.load = runEngine(t, first, ddpCfg)[0]
	rest.gem.DeviceBudget = budget
	for r, res := range runGemini(t, rest) {
		if d := stateDiff(ref, res.state); d != "" {
			t.Errorf("DDP's checkpoint resumed by Gemini rank %d differs from the uninterrupted run: %s", r, d)
		}
	}
	// A world-2 state loaded by one rank reads back unchanged.
	one := full
	one.world, one.from, one.load = 1, 3, gemState
	if d := stateDiff(gemState, runGemini(t, one)[0].state); d != "" {
		t.Errorf("world-2 state loaded into world 1 reads back differently: %s", d)
	}
}

func TestLoadStateRejectsMismatch(t *testing.T) {
	spec := budgetBase(1, Static)
	spec.steps = 1
	st := runGemini(t, spec)[0].state
	bad := *st
	bad.ExpAvg = bad.ExpAvg[:3]
	spec.load = &bad
	if _, err := runGeminiErr(spec); err == nil {
		t.Fatal("a state with 3 moment tensors loaded into a model with more parameters")
	}
	bad = *st
	bad.Model = bad.Model[1:]
	spec.load = &bad
	if _, err := runGeminiErr(spec); err == nil {
		t.Fatal("a state without conv1.weight loaded")
	}
}
