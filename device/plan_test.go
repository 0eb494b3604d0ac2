package device

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"resnetlab/kernels/cuda"
)

// The grid says why the CPU is used once; each run keeps only its own part.
func TestRunNoticeDropsWhy(t *testing.T) {
	p := CPUPlan(2, "no CUDA GPU (x): training on the CPU backend")
	if !strings.HasPrefix(p.Notice, p.Why) || p.RunNotice() != strings.TrimPrefix(p.Notice, p.Why+"; ") {
		t.Fatalf("notice %q, why %q, run notice %q", p.Notice, p.Why, p.RunNotice())
	}
	if one := CPUPlan(1, "why"); one.RunNotice() != "" {
		t.Fatalf("one rank: run notice %q, want none", one.RunNotice())
	}
}

// Concurrent runs start on different GPUs and wrap around.
func TestPlaceSpreadsGPUs(t *testing.T) {
	p := Plan{Kind: "cuda", Devices: []int{0, 1}}
	p.Place(Share{FirstDevice: 3, Devices: 4}, 2)
	if p.Devices[0] != 3 || p.Devices[1] != 0 {
		t.Fatalf("devices %v, want [3 0]", p.Devices)
	}
}

func TestPlanForCPUAndMissingGPU(t *testing.T) {
	p, err := PlanFor("cpu", 1, false)
	if err != nil || p.Kind != "cpu" {
		t.Fatalf("cpu: %+v %v", p, err)
	}
	if cuda.Available() == nil {
		t.Skip("a GPU is here")
	}
	if _, err := PlanFor("cuda", 1, false); err == nil || !strings.Contains(err.Error(), "no GPU can be used") {
		t.Fatalf("cuda without a GPU: %v", err)
	}
	if p, err := PlanFor("auto", 2, false); err != nil || p.Kind != "cpu" || p.Why == "" {
		t.Fatalf("auto without a GPU: %+v %v", p, err)
	}
}

func TestOOMCause(t *testing.T) {
	drv := &cuda.Error{Name: "CUDA_ERROR_OUT_OF_MEMORY", Code: 2, Call: "cuMemAlloc_v2(8 bytes; 1 in use, 2 reserved, capacity 3)"}
	oom, ok := OOMCause(fmt.Errorf("rank 0: %w", drv))
	if !ok || oom.Call != drv.Call || !errors.Is(oom.Err, drv) {
		t.Fatalf("OOMCause = %+v, %v", oom, ok)
	}
	if _, ok := OOMCause(&cuda.Error{Name: "CUDA_ERROR_INVALID_VALUE", Code: 1}); ok {
		t.Fatal("an invalid-value error is not out of memory")
	}
}
