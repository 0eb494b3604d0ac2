package graphtest

import (
	"strings"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
)

func TestReplayUsesCapturedArguments(t *testing.T) {
	r := New(cpu.New())
	a := r.New(kernels.CatData, kernels.F32, 3)
	r.Upload(a, []float32{1, 2, 3})
	if err := r.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	r.Scale(a, 2)
	g, err := r.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	h := make([]float32, 3)
	if r.Download(a, h); h[0] != 1 {
		t.Fatalf("capturing ran the op: %v", h)
	}
	for range 2 {
		if err := g.Launch(); err != nil {
			t.Fatal(err)
		}
	}
	if r.Download(a, h); h[0] != 4 || h[2] != 12 {
		t.Fatalf("two replays of Scale(a, 2): %v, want [4 8 12]", h)
	}
	g.Destroy()
	if err := g.Launch(); err == nil {
		t.Error("Launch of a destroyed graph succeeded")
	}
}

func TestCaptureRefusesHostWork(t *testing.T) {
	r := New(cpu.New())
	a := r.New(kernels.CatData, kernels.F32, 2)
	for name, op := range map[string]func(){
		"Upload":    func() { r.Upload(a, []float32{1, 2}) },
		"Download":  func() { r.Download(a, make([]float32, 2)) },
		"NonFinite": func() { r.NonFinite([]*kernels.Tensor{a}) },
	} {
		_ = r.BeginCapture()
		msg := panicOf(op)
		_, _ = r.EndCapture()
		if !strings.Contains(msg, name+" cannot run inside a graph capture") {
			t.Errorf("%s in a capture: panic %q", name, msg)
		}
	}
	_ = r.BeginCapture()
	if err := r.Sync(); err == nil {
		t.Error("Sync in a capture succeeded")
	}
	_, _ = r.EndCapture()
}

func TestFreeDuringCaptureWaitsForDestroy(t *testing.T) {
	r := New(cpu.New())
	a := r.New(kernels.CatActivations, kernels.F32, 4)
	_ = r.BeginCapture()
	r.Fill(a, 3)
	r.Free(a) // the graph still writes a
	g, _ := r.EndCapture()
	if err := g.Launch(); err != nil {
		t.Fatal(err)
	}
	if got := r.MemStats().InUse[kernels.CatActivations]; got != 16 {
		t.Errorf("%d activation bytes in use before Destroy, want 16", got)
	}
	g.Destroy()
	if got := r.MemStats().InUse[kernels.CatActivations]; got != 0 {
		t.Errorf("%d activation bytes in use after Destroy, want 0", got)
	}
}

func panicOf(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg, _ = p.(string)
		}
	}()
	f()
	return ""
}
