package kernels_test

import (
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
)

// hidden is a Backend without an AsyncMover of its own.
type hidden struct{ kernels.Backend }

func TestMoverOf(t *testing.T) {
	be := cpu.New()
	if m, ok := kernels.MoverOf(be).(*cpu.Backend); !ok || m != be {
		t.Fatalf("MoverOf(cpu backend) = %T, want the backend itself", kernels.MoverOf(be))
	}
	for _, m := range []kernels.AsyncMover{kernels.MoverOf(hidden{be}), be} {
		x := be.New(kernels.CatParams, kernels.F16, 3)
		up := m.UploadAsync(x, []float32{1, 2.0004, -3})
		if !up.Done() {
			t.Fatalf("%T: a synchronous upload is not done", m)
		}
		m.Await(up)
		got := make([]float32, 3)
		down := m.DownloadAsync(x, got)
		m.Finish(down)
		if !down.Done() || got[0] != 1 || got[1] != kernels.RoundF16(2.0004) || got[2] != -3 {
			t.Fatalf("%T: round trip through fp16 gave %v (done %v)", m, got, down.Done())
		}
		be.Free(x)
	}
}
