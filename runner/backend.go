package runner

import (
	"fmt"
	"runtime"
	"strings"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/kernels/cuda"
)

// backendPlan says where each rank of a run computes.
type backendPlan struct {
	kind    string // "cpu" or "cuda"
	devices []int  // CUDA ordinal per rank
	workers int    // CPU worker goroutines per rank; 0 = the cores split over this run's ranks
	notice  string // one line for the log, e.g. why the CPU is used
	why     string // the part of notice that says why the CPU is used
}

// planBackends resolves the spec's device setting for ranks ranks.
// "auto" uses every local GPU and falls back to the CPU with a notice.
func planBackends(device string, ranks int, share bool) (backendPlan, error) {
	if device == "cpu" {
		return cpuPlan(ranks, ""), nil
	}
	if err := cuda.Available(); err != nil {
		if device == "cuda" {
			return backendPlan{}, fmt.Errorf("device = \"cuda\" but no GPU can be used: %v", err)
		}
		return cpuPlan(ranks, fmt.Sprintf("no CUDA GPU (%v): training on the CPU backend", err)), nil
	}
	n := cuda.DeviceCount()
	if ranks > n && !share {
		return backendPlan{}, fmt.Errorf("the run needs %d GPUs but %d found (set share_devices = true to let ranks share GPUs)", ranks, n)
	}
	p := backendPlan{kind: "cuda"}
	for r := 0; r < ranks; r++ {
		p.devices = append(p.devices, r%n)
	}
	if ranks > n {
		p.notice = fmt.Sprintf("%d ranks share %d GPU(s)", ranks, n)
	}
	return p, nil
}

// runNotice is the notice without why the CPU is used, which the grid
// says once for all its runs.
func (p backendPlan) runNotice() string {
	if p.why == "" {
		return p.notice
	}
	return strings.TrimPrefix(strings.TrimPrefix(p.notice, p.why), "; ")
}

func cpuPlan(ranks int, notice string) backendPlan {
	why := notice
	if ranks > 1 {
		if notice != "" {
			notice += "; "
		}
		notice += fmt.Sprintf("%d CPU ranks share %d cores", ranks, runtime.GOMAXPROCS(0))
	}
	return backendPlan{kind: "cpu", notice: notice, why: why}
}

// place moves the plan onto its share of a machine that runs several runs
// at once (see planGrid): CUDA ranks start at device pl.firstDevice, so
// that concurrent runs fill different GPUs before they share one; CPU
// ranks split the cores with every rank of every concurrent run.
func (p *backendPlan) place(pl placement, ranks int) {
	switch p.kind {
	case "cuda":
		if pl.devices < 1 {
			return
		}
		for r := range p.devices {
			p.devices[r] = (pl.firstDevice + r) % pl.devices
		}
	case "cpu":
		if pl.cpuRanks <= ranks { // no other run shares the cores
			return
		}
		// The grid's log line says how the runs share the cores; the
		// run's device names its worker count.
		p.workers, p.notice = max(1, runtime.GOMAXPROCS(0)/pl.cpuRanks), p.why
	}
}

// open creates rank r's backend. CPU ranks split the cores between them
// (results do not depend on the worker count).
func (p backendPlan) open(r, ranks int) (kernels.Backend, error) {
	if p.kind == "cpu" {
		w := p.workers
		if w < 1 {
			w = max(1, runtime.GOMAXPROCS(0)/ranks)
		}
		return cpu.New(cpu.WithWorkers(w)), nil
	}
	return cuda.New(p.devices[r])
}

// closeBackend releases a device backend's context.
func closeBackend(be kernels.Backend) {
	if c, ok := be.(interface{ Close() }); ok {
		c.Close()
	}
}
