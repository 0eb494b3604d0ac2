package runner

import (
	"errors"
	"fmt"
	"resnetlab/spec"
	"strings"
	"testing"

	"resnetlab/device"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/kernels/cuda"
)

const gib = int64(1) << 30

// allocOOM is the error kernels/cuda's allocator panics with when
// cuMemAlloc fails (its Call format is what parseAllocCall reads).
func allocOOM(req, inUse, reserved, capacity int64) *cuda.Error {
	return &cuda.Error{Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY",
		Call: fmt.Sprintf("cuMemAlloc_v2(%d bytes; %d in use, %d reserved, capacity %d)", req, inUse, reserved, capacity)}
}

func TestExplainOOMFromAllocator(t *testing.T) {
	drv := allocOOM(512<<20, 100*gib, 120*gib, 140*gib)
	// As the rank pool sees it: a recovered panic wrapped with %w.
	err := fmt.Errorf("panic: %w", drv)
	cell := spec.Cell{ID: "torch_ddp-fp32-2", Plugin: spec.PluginTorchDDP, Precision: "fp32", WorldSize: 2}
	got := explainOOM(err, 1, "NVIDIA H200 #1", cell, 0, nil)
	var oe *OOMError
	if !errors.As(got, &oe) {
		t.Fatalf("got %T %v, want an *OOMError", got, got)
	}
	var ce *cuda.Error
	if !errors.As(got, &ce) || ce != drv {
		t.Fatal("the driver error is not reachable through errors.As")
	}
	if oe.Request != 512<<20 || oe.InUse != 100*gib || oe.Reserved != 120*gib || oe.Capacity != 140*gib {
		t.Fatalf("sizes %+v", oe)
	}
	msg := got.Error()
	t.Log(msg)
	for _, frag := range []string{
		"rank 1 on NVIDIA H200 #1 ran out of device memory (run torch_ddp-fp32-2)",
		"allocating 512.00 MiB failed with 100.00 GiB in use and 120.00 GiB reserved of 140.00 GiB",
		// 80% of 140 GiB is 112 GiB.
		`run plugin gemini with a [gemini] device_budget (e.g. device_budget = "112GiB")`,
		"low_level_zero or gemini", "lower batch_size",
		"CUDA_ERROR_OUT_OF_MEMORY",
	} {
		if !strings.Contains(msg, frag) {
			t.Errorf("message lacks %q:\n%s", frag, msg)
		}
	}
	// The suggested budget must be a size the spec accepts.
	if n, err := spec.ParseSize("112GiB"); err != nil || n != 112*gib {
		t.Fatalf("suggested budget does not parse: %d %v", n, err)
	}
	if again := explainOOM(fmt.Errorf("rank 1: %w", got), 1, "x", cell, 0, nil); !errors.Is(again, got) ||
		strings.Count(again.Error(), "ran out of device memory") != 1 {
		t.Fatalf("explaining twice: %v", again)
	}
}

func TestExplainOOMGeminiAdvice(t *testing.T) {
	drv := allocOOM(1<<20, 2*gib, 2*gib, 80*gib)
	cell := spec.Cell{ID: "gemini-fp16-1", Plugin: spec.PluginGemini, Precision: "fp16", WorldSize: 1}
	msg := explainOOM(drv, 0, "d", cell, 2*gib, nil).Error()
	if !strings.Contains(msg, "lower [gemini] device_budget (now 2.00 GiB)") ||
		!strings.Contains(msg, `placement = "auto"`) || strings.Contains(msg, "run plugin gemini") {
		t.Fatalf("gemini with a budget: %s", msg)
	}
	msg = explainOOM(drv, 0, "d", cell, 0, nil).Error()
	if !strings.Contains(msg, `set a [gemini] device_budget below the device's memory (e.g. device_budget = "64GiB")`) {
		t.Fatalf("gemini without a budget: %s", msg)
	}
}

func TestExplainOOMOtherCallUsesSnapshot(t *testing.T) {
	drv := &cuda.Error{Call: "cuModuleLoadData", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	cell := spec.Cell{ID: "c", Plugin: spec.PluginTorchDDP}
	msg := explainOOM(drv, 3, "", cell, 0, &memSnapshot{inUse: 3 * gib, capacity: 4 * gib}).Error()
	want := "rank 3 ran out of device memory (run c): an allocation failed with 3.00 GiB in use of 4.00 GiB. To fit: "
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("got  %s\nwant prefix %s", msg, want)
	}
	msg = explainOOM(drv, 0, "", cell, 0, nil).Error()
	if !strings.Contains(msg, ": an allocation failed. To fit: ") || !strings.Contains(msg, `"8GiB"`) {
		t.Fatalf("nothing known: %s", msg)
	}
}

func TestExplainOOMLeavesOtherErrors(t *testing.T) {
	for _, err := range []error{
		errors.New("loss is NaN"),
		&cuda.Error{Call: "cuLaunchKernel(x)", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"},
		nil,
	} {
		if got := explainOOM(err, 0, "d", spec.Cell{}, 0, nil); got != err {
			t.Errorf("%v became %v", err, got)
		}
		if IsOOM(err) {
			t.Errorf("IsOOM(%v)", err)
		}
	}
}

// The job's glue takes the device name and usage from the rank's backend.
func TestJobExplainOOM(t *testing.T) {
	be := cpu.New()
	j := &job{spec: &spec.Spec{Gemini: spec.GeminiSpec{DeviceBudget: 5 * gib}},
		cell:  spec.Cell{ID: "gemini-bf16-1", Plugin: spec.PluginGemini},
		ranks: []*rankState{{be: be}}}
	got := j.explainOOM(0, &cuda.Error{Call: "cuMemAllocHost", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"})
	var oe *OOMError
	if !errors.As(got, &oe) || oe.Device != be.Device() || oe.InUse != be.MemStats().Total() ||
		oe.DeviceBudget != 5*gib || oe.Rank != 0 {
		t.Fatalf("got %#v", got)
	}
	plain := errors.New("x")
	if j.explainOOM(0, plain) != plain || j.explainOOM(7, plain) != plain {
		t.Fatal("a non-OOM error changed")
	}
}

// An out-of-memory error raised on a rank (the CUDA allocator panics with
// it) comes out of the rank pool explained by the job: the rank, its
// device, the request and the advice, with the driver error still in the
// chain and the group aborted with the same error.
func TestRankPoolExplainsOOM(t *testing.T) {
	be0, be1 := cpu.New(), cpu.New()
	j := &job{spec: &spec.Spec{}, cell: spec.Cell{ID: "torch_ddp-fp32-2", Plugin: spec.PluginTorchDDP, WorldSize: 2},
		ranks: []*rankState{{be: be0}, {be: be1}}}
	var aborted error
	p := startRanks(2, func(err error) { aborted = err })
	p.explain = j.explainOOM
	defer p.close()

	drv := allocOOM(768<<20, 60*gib, 70*gib, 80*gib)
	err := p.do(func(r int) error {
		if r == 1 {
			panic(drv)
		}
		return nil
	})
	var oe *OOMError
	var ce *cuda.Error
	if !errors.As(err, &oe) || oe.Rank != 1 || !errors.As(err, &ce) || ce != drv {
		t.Fatalf("got %T %v, want an *OOMError of rank 1 wrapping the driver error", err, err)
	}
	if aborted != err {
		t.Fatalf("group aborted with %v, want the explained error", aborted)
	}
	msg := err.Error()
	for _, frag := range []string{
		"rank 1 on " + be1.Device() + " ran out of device memory (run torch_ddp-fp32-2)",
		"allocating 768.00 MiB failed",
		`run plugin gemini with a [gemini] device_budget (e.g. device_budget = "64GiB")`,
	} {
		if !strings.Contains(msg, frag) {
			t.Errorf("message lacks %q:\n%s", frag, msg)
		}
	}
	if strings.HasPrefix(msg, "rank 1: ") {
		t.Errorf("the rank is named twice: %s", msg)
	}

	// Returned (not panicked) by a Gemini rank with a budget: the sizes
	// come from the rank's backend, the advice is to lower the budget.
	j.cell, j.spec.Gemini.DeviceBudget = spec.Cell{ID: "gemini-fp16-2", Plugin: spec.PluginGemini, WorldSize: 2}, 3*gib
	host := &cuda.Error{Call: "cuMemAllocHost", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	err = p.do(func(r int) error {
		if r == 0 {
			return fmt.Errorf("forward conv1: %w", host)
		}
		return nil
	})
	if !errors.As(err, &oe) || oe.Rank != 0 || oe.Device != be0.Device() || oe.Request != -1 ||
		oe.InUse != be0.MemStats().Total() || !errors.As(err, &ce) || ce != host {
		t.Fatalf("got %#v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "lower [gemini] device_budget (now 3.00 GiB)") {
		t.Errorf("gemini advice missing:\n%s", msg)
	}
}

// Other errors keep the pool's "rank N: " prefix and their chain.
func TestRankPoolOtherErrors(t *testing.T) {
	j := &job{spec: &spec.Spec{}, ranks: []*rankState{{be: cpu.New()}, {be: cpu.New()}}}
	p := startRanks(2, nil)
	p.explain = j.explainOOM
	defer p.close()
	boom := errors.New("boom")
	illegal := &cuda.Error{Call: "cuLaunchKernel(x)", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"}
	for _, c := range []struct {
		f    func() error
		want string
		is   error
	}{
		{func() error { return boom }, "rank 1: boom", boom},
		{func() error { panic(illegal) }, "rank 1: panic: " + illegal.Error(), illegal},
		{func() error { panic("index out of range") }, "rank 1: panic: index out of range", nil},
	} {
		err := p.do(func(r int) error {
			if r == 1 {
				return c.f()
			}
			return nil
		})
		if err == nil || err.Error() != c.want || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("got %v, want %q wrapping %v", err, c.want, c.is)
		}
		if IsOOM(err) {
			t.Errorf("%v counted as out of memory", err)
		}
	}
}

// setup wires the job's explanation into its pool: an OOM raised in a
// rank of a real (CPU) job names that rank's backend and the run.
func TestJobSetupExplainsOOM(t *testing.T) {
	s, cells, _, err := RunOptions{}.Apply(tinySpec(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	train, test, err := loadData(s)
	if err != nil {
		t.Fatal(err)
	}
	j := &job{spec: s, cell: cells[0], train: train, test: test, precision: kernels.F32,
		plan: device.CPUPlan(1, "")}
	defer j.close()
	if err := j.setup(); err != nil {
		t.Fatal(err)
	}
	err = j.pool.do(func(int) error { panic(allocOOM(1<<30, 2*gib, 2*gib, 4*gib)) })
	var oe *OOMError
	if !errors.As(err, &oe) || oe.Device != j.ranks[0].be.Device() || oe.Run != cells[0].ID ||
		!strings.Contains(err.Error(), "rank 0 on "+oe.Device+" ran out of device memory") {
		t.Fatalf("got %v, want the job's explanation", err)
	}
}
