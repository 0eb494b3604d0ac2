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
	acc, pc := evaluateModel(m, be, test, nil, kernels.F32, EvalBatch)
	for _, b := range []int{10, 7} {
		a, p := evaluateModel(m, be, test, nil, kernels.F32, b)
		if a != acc || !slices.Equal(p, pc) {
			t.Errorf("batch %d: accuracy %v per class %v, batch %d: %v %v", b, a, p, EvalBatch, acc, pc)
		}
	}
	if acc == 0 {
		t.Fatalf("accuracy 0: the model scored nothing, the comparison says little")
	}
}
