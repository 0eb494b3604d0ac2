package cpu

import (
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/fusetest"
)

// TestBatchNormActMatchesSeparate: the fused batch norm + (add +) ReLU is
// bit-identical to BatchNormForward, Add, ReLUForward and to ReLUBackward,
// BatchNormBackward, in every dtype, train and eval, with and without the
// residual, with one worker and with several.
func TestBatchNormActMatchesSeparate(t *testing.T) {
	for _, workers := range []int{1, 3} {
		be := New(WithWorkers(workers))
		f := kernels.FusedBNOf(be)
		if f == nil {
			t.Fatal("cpu backend does not offer kernels.FusedBN")
		}
		for _, c := range fusetest.BNActCases() {
			t.Run(c.String(), func(t *testing.T) { fusetest.CheckBNAct(t, be, f, c) })
		}
	}
}
