package device

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/kernels/cuda"
)

// Plan says where each rank of a run computes.
type Plan struct {
	Kind    string // "cpu" or "cuda"
	Devices []int  // CUDA ordinal per rank
	Workers int    // CPU worker goroutines per rank; 0 = the cores split over this run's ranks
	Notice  string // one line for the log, e.g. why the CPU is used
	Why     string // the part of Notice that says why the CPU is used
}

// PlanFor resolves a spec's device setting ("auto", "cpu", "cuda") for
// ranks ranks. "auto" uses every local GPU and falls back to the CPU with
// a notice; share lets more ranks than GPUs share them.
func PlanFor(device string, ranks int, share bool) (Plan, error) {
	if device == "cpu" {
		return CPUPlan(ranks, ""), nil
	}
	if err := cuda.Available(); err != nil {
		if device == "cuda" {
			return Plan{}, fmt.Errorf("device = \"cuda\" but no GPU can be used: %v", err)
		}
		return CPUPlan(ranks, fmt.Sprintf("no CUDA GPU (%v): training on the CPU backend", err)), nil
	}
	n := cuda.DeviceCount()
	if ranks > n && !share {
		return Plan{}, fmt.Errorf("the run needs %d GPUs but %d found (set share_devices = true to let ranks share GPUs)", ranks, n)
	}
	p := Plan{Kind: "cuda"}
	for r := 0; r < ranks; r++ {
		p.Devices = append(p.Devices, r%n)
	}
	if ranks > n {
		p.Notice = fmt.Sprintf("%d ranks share %d GPU(s)", ranks, n)
	}
	return p, nil
}

// CPUPlan is the plan of ranks CPU ranks; notice says why the CPU is used
// ("" when the spec asked for it).
func CPUPlan(ranks int, notice string) Plan {
	why := notice
	if ranks > 1 {
		if notice != "" {
			notice += "; "
		}
		notice += fmt.Sprintf("%d CPU ranks share %d cores", ranks, runtime.GOMAXPROCS(0))
	}
	return Plan{Kind: "cpu", Notice: notice, Why: why}
}

// RunNotice is the notice without why the CPU is used, which a grid says
// once for all its runs.
func (p Plan) RunNotice() string {
	if p.Why == "" {
		return p.Notice
	}
	return strings.TrimPrefix(strings.TrimPrefix(p.Notice, p.Why), "; ")
}

// Share is a run's part of a machine that runs several runs at once.
type Share struct {
	FirstDevice int // CUDA: rank r trains on GPU (FirstDevice + r) mod Devices
	Devices     int // CUDA: GPUs found; 0 leaves the plan as it is
	CPURanks    int // CPU: ranks of every concurrent run, which split the cores
}

// Place moves the plan onto its share of the machine: CUDA ranks start at
// device s.FirstDevice, so that concurrent runs fill different GPUs before
// they share one; CPU ranks split the cores with every rank of every
// concurrent run.
func (p *Plan) Place(s Share, ranks int) {
	switch p.Kind {
	case "cuda":
		if s.Devices < 1 {
			return
		}
		for r := range p.Devices {
			p.Devices[r] = (s.FirstDevice + r) % s.Devices
		}
	case "cpu":
		if s.CPURanks <= ranks { // no other run shares the cores
			return
		}
		// The grid's log line says how the runs share the cores; the
		// run's device names its worker count.
		p.Workers, p.Notice = max(1, runtime.GOMAXPROCS(0)/s.CPURanks), p.Why
	}
}

// Open creates rank r's backend. CPU ranks split the cores between them
// (results do not depend on the worker count).
func (p Plan) Open(r, ranks int) (kernels.Backend, error) {
	if p.Kind == "cpu" {
		w := p.Workers
		if w < 1 {
			w = max(1, runtime.GOMAXPROCS(0)/ranks)
		}
		return cpu.New(cpu.WithWorkers(w)), nil
	}
	return cuda.New(p.Devices[r])
}

// Host is a CPU backend for work that stays on the host whatever the run's
// device: Gemini's host tier, building a model to read or write a file.
func Host() kernels.Backend { return cpu.New() }

// Close releases a device backend's context.
func Close(be kernels.Backend) {
	if c, ok := be.(interface{ Close() }); ok {
		c.Close()
	}
}

// GPUs is the number of CUDA devices this process can use, or the reason
// there are none.
func GPUs() (int, error) {
	if err := cuda.Available(); err != nil {
		return 0, err
	}
	return cuda.DeviceCount(), nil
}

// OOMCause finds a CUDA out-of-memory error in err's chain: the driver
// error itself and the call that failed (the allocator writes the sizes
// into it: "cuMemAlloc_v2(N bytes; N in use, N reserved, capacity N)").
func OOMCause(err error) (OOM, bool) {
	var ce *cuda.Error
	if !errors.As(err, &ce) || (ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" && ce.Code != 2) {
		return OOM{}, false
	}
	return OOM{Err: ce, Call: ce.Call}, true
}

// OOM is a device out-of-memory error and the call that failed.
type OOM struct {
	Err  error
	Call string
}
