package runner

import (
	"fmt"
	"resnetlab/device"
	"resnetlab/spec"
	"runtime"
)

// The rule for concurrent = true ("the grid's runs train at the same time
// if the devices allow"):
//
//   - CPU backend: always. The runs split the cores: every CPU rank of every
//     run gets GOMAXPROCS / (ranks of all runs) worker goroutines, at least
//     one. Results do not depend on the worker count, so a run gives the
//     same model concurrently as alone.
//   - CUDA: when share_devices = true, or when the runs' ranks together fit
//     the GPUs one rank per GPU. Run k's ranks start at GPU (ranks of runs
//     0..k-1) mod GPUs, so concurrent runs fill different GPUs before any
//     two share one. Otherwise (share_devices = false and more ranks than
//     GPUs) the runs train one after another, and a warning says why.
//
// Either way a run that fails ends alone: the others go on.

// placement is one run's share of the machine while runs train at once.
type placement struct {
	firstDevice int // CUDA: rank r trains on GPU (firstDevice + r) mod devices
	devices     int // CUDA: GPUs found; 0 leaves the run's plan as it is
	cpuRanks    int // CPU: ranks of every concurrent run, which split the cores
}

// share is the placement as the device plan takes it.
func (pl placement) share() device.Share {
	return device.Share{FirstDevice: pl.firstDevice, Devices: pl.devices, CPURanks: pl.cpuRanks}
}

// gridPlan says how many of a spec's runs train at once and where.
type gridPlan struct {
	slots  int         // runs training at the same time; 1 = one after another
	places []placement // per cell
	notice string      // a line for the log: how the runs share, or why they cannot
	level  Level       // the notice's level: LevelInfo or LevelWarn
}

// planGrid applies the rule above to the spec's runs on this machine.
func planGrid(s *spec.Spec, cells []spec.Cell) gridPlan {
	if !s.Concurrent || len(cells) < 2 {
		return planGridOn(s, cells, "", 0)
	}
	kind, n := "cpu", 0
	if s.Device != "cpu" {
		if gpus, err := device.GPUs(); err == nil {
			kind, n = "cuda", gpus
		} else if s.Device == "cuda" {
			kind = "" // every run fails with planBackends' error; nothing to share
		}
	}
	return planGridOn(s, cells, kind, n)
}

// planGridOn is planGrid for a known backend kind ("cpu", "cuda" or "" for
// none) with n GPUs.
func planGridOn(s *spec.Spec, cells []spec.Cell, kind string, n int) gridPlan {
	p := gridPlan{slots: 1, places: make([]placement, len(cells)), level: LevelInfo}
	if !s.Concurrent || len(cells) < 2 || kind == "" {
		return p
	}
	total := 0
	for _, c := range cells {
		total += c.WorldSize
	}
	switch kind {
	case "cpu":
		for i := range p.places {
			p.places[i].cpuRanks = total
		}
		p.slots = len(cells)
		p.notice = fmt.Sprintf("concurrent = true: %d runs train at once on the CPU; their %d ranks share %d cores (%d worker(s) each)",
			len(cells), total, runtime.GOMAXPROCS(0), max(1, runtime.GOMAXPROCS(0)/total))
	case "cuda":
		if total > n && !s.ShareDevices {
			p.level = LevelWarn
			p.notice = fmt.Sprintf("concurrent = true, but the %d runs need %d GPUs together, %d found, and share_devices = false: "+
				"they train one after another (set share_devices = true to let concurrent runs share GPUs)", len(cells), total, n)
			return p
		}
		first := 0
		for i, c := range cells {
			p.places[i] = placement{firstDevice: first % n, devices: n}
			first += c.WorldSize
		}
		p.slots = len(cells)
		p.notice = fmt.Sprintf("concurrent = true: %d runs train at once; their %d ranks on %d GPU(s)", len(cells), total, n)
		if total > n {
			p.notice += " (GPUs are shared: share_devices = true)"
		}
	}
	return p
}
