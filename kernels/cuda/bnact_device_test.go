package cuda

import (
	"math"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/fusetest"
)

// bnActOrSkip returns the device backend, or skips when the loaded PTX
// predates the fused BN kernels (src/ops.cu before next/ops.cu is
// promoted; stage_fp16 of scripts/device_run.sh builds it from next/).
func bnActOrSkip(t *testing.T) *Backend {
	b := device(t)
	if !b.hasBNAct() {
		t.Skipf("the loaded PTX lacks %v (built from kernels/cuda/src before next/ops.cu was promoted)", bnActKernels)
	}
	return b
}

// The fused BN+ReLU(+add) kernels give exactly what bn_fwd_*, add,
// relu_fwd and relu_bwd, bn_bwd give: outputs, running and saved
// statistics and gradients bit for bit, in fp32, fp16 and bf16, train and
// eval, with and without the residual and the ds output. The same checks
// run on the CPU backend in CI (kernels/cpu).
func TestBNActMatchesSeparate(t *testing.T) {
	b := bnActOrSkip(t)
	cases := append(fusetest.BNActCases(),
		fusetest.BNActCase{DType: kernels.F16, Training: true, Residual: true, N: 100, C: 64, H: 16, W: 16}, // 1024 threads
		fusetest.BNActCase{DType: kernels.F16, Training: true, Residual: false, N: 100, C: 512, H: 2, W: 2})
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { fusetest.CheckBNAct(t, b, b, c) })
	}
}

// A ResNet-18 training step with BN+ReLU(+add) fused computes exactly what
// the separate kernels compute: three steps of the test net, fused and
// not, from the same initial weights and batch, give the same loss, fp32
// master weights and gradients bit for bit.
func TestBNActResNet18Step(t *testing.T) {
	b := bnActOrSkip(t)
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
		fu, sep := newNetWith(b, dt, 16, b), newNetWith(b, dt, 16, nil)
		fu.data()
		sep.data()
		for step := 1; step <= 3; step++ {
			fu.step()
			sep.step()
			fu.hp.Step++
			sep.hp.Step++
			if lf, ls := fu.lossValue(), sep.lossValue(); math.Float32bits(lf) != math.Float32bits(ls) {
				t.Fatalf("%v step %d: loss %v fused, %v separate", dt, step, lf, ls)
			}
			for i := range fu.master {
				if !sameBits32(download(b, fu.master[i]), download(b, sep.master[i])) ||
					!sameBits32(download(b, fu.grads[i]), download(b, sep.grads[i])) {
					t.Fatalf("%v step %d: parameter %d %v or its gradient differs fused vs separate", dt, step, i, fu.master[i])
				}
			}
		}
	}
}

func sameBits32(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}
