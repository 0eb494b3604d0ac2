package runner

import (
	"slices"
	"testing"

	"resnetlab/data"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

// Evaluation scores each image on its own (batch norm in eval mode), so
// the batch size, which a Gemini device budget lowers to the training
// batch, changes no score: the same accuracy and per-class accuracy at
// batch 128, 10 and 7 (a partial last batch).
func TestEvaluationIgnoresTheBatchSize(t *testing.T) {
	be := cpu.New()
	m := model.NewResNet18(be, model.Config{Width: 8, InChannels: 3, NumClasses: 10, DType: kernels.F32, Seed: 4})
	defer m.Free()
	_, test := data.Synthetic(10, 150, 9)
	acc, pc := evaluateModel(m, be, test, nil, kernels.F32, EvalBatch, nil)
	for _, b := range []int{10, 7} {
		a, p := evaluateModel(m, be, test, nil, kernels.F32, b, nil)
		if a != acc || !slices.Equal(p, pc) {
			t.Errorf("batch %d: accuracy %v per class %v, batch %d: %v %v", b, a, p, EvalBatch, acc, pc)
		}
	}
	if acc == 0 {
		t.Fatalf("accuracy 0: the model scored nothing, the comparison says little")
	}
}

// An evaluation between training steps takes its batches through the
// step's input tensor when they have its shape, so it holds no input
// memory beyond the step's (under a Gemini budget it would count): its
// device peak is one batch tensor lower than with buffers of its own, and
// the scores are the same.
func TestEvaluationReusesTheStepInput(t *testing.T) {
	be := cpu.New()
	m := model.NewResNet18(be, model.Config{Width: 8, InChannels: 3, NumClasses: 10, DType: kernels.F32, Seed: 4})
	defer m.Free()
	_, test := data.Synthetic(10, 100, 9) // batches of 10, no partial one
	x := be.New(kernels.CatData, kernels.F32, 10, test.C, data.Side, data.Side)
	defer be.Free(x)
	peakOf := func(step *stepInput) (float64, int64) {
		be.ResetPeak()
		acc, _ := evaluateModel(m, be, test, nil, kernels.F32, 10, step)
		return acc, be.MemStats().TotalPeak
	}
	own, ownPeak := peakOf(nil)
	reused, reusedPeak := peakOf(&stepInput{x, &inputBuf{}})
	if reused != own || ownPeak-reusedPeak != x.Bytes() {
		t.Errorf("accuracy %v with the step's input, %v with its own; peak %d B against %d B: want %d B (one batch) less",
			reused, own, reusedPeak, ownPeak, x.Bytes())
	}
}
