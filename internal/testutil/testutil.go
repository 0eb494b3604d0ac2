package testutil

import (
	"fmt"
	"math"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cuda"
)

// DiffBits reports the first element whose bits differ. It returns an error
// rather than failing a test, so rank goroutines can call it.
func DiffBits(what string, got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Errorf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}

// NeedGPU skips the test without a usable CUDA device and returns the
// number of devices.
func NeedGPU(tb testing.TB) int {
	tb.Helper()
	if err := cuda.Available(); err != nil {
		tb.Skip("no GPU: ", err)
	}
	return cuda.DeviceCount()
}

// OnDevices opens rank r's CUDA backend on devs[r % len(devs)].
func OnDevices(devs ...int) func(r int) (kernels.Backend, error) {
	return func(r int) (kernels.Backend, error) { return cuda.New(devs[r%len(devs)]) }
}
