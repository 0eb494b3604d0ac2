package tui

import (
	"resnetlab/runner"
	"resnetlab/spec"
)

// cmpStats keeps, from a run's events, what the comparison bars need that
// the panes do not keep: each rank's largest device report (the breakdown
// at its peak), the peaks, and the host<->device traffic.
type cmpStats struct {
	ranks []rankPeak
	// gemini: every chunk move is reported (ChunkMoved, or for a rank of
	// another process its totals, ChunkMoves), so a run that moved
	// nothing has moved 0 bytes, not an unknown amount.
	gemini bool
}

// rankPeak is one rank's peaks since the run (re)started.
type rankPeak struct {
	dev      [6]int64 // breakdown of the largest device report seen
	devPeak  int64
	hostPeak int64
	h2d, d2h int64 // bytes moved to the device / to the host
	xfer     bool  // h2d/d2h are known (Gemini moves, or the events carry them)
}

// memFacts is what one MemoryUsage event says, in one place so that a new
// field of the event is wired here only: device and host bytes per
// category, their peaks, and the cumulative h2d/d2h volume when the event
// carries it (xfer false: it does not, and ChunkMoved events count it).
type memFacts struct {
	dev, host         [6]int64
	devPeak, hostPeak int64
	h2d, d2h          int64
	xfer              bool
}

func factsOf(u runner.MemoryUsage) memFacts {
	return memFacts{dev: u.Device, host: hostCategories(u), devPeak: u.DevicePeak, hostPeak: u.HostTotalPeak()}
}

func (c *cmpStats) rank(r int) *rankPeak {
	for len(c.ranks) <= r {
		c.ranks = append(c.ranks, rankPeak{})
	}
	return &c.ranks[r]
}

func (c *cmpStats) Update(ev runner.Event) {
	switch e := ev.(type) {
	case runner.RunStarted:
		c.ranks, c.gemini = nil, e.Info.Plugin == spec.PluginGemini
	case runner.MemoryUsage:
		if e.Rank < 0 {
			return
		}
		f, p := factsOf(e), c.rank(e.Rank)
		if total(f.dev) > total(p.dev) {
			p.dev = f.dev
		}
		p.devPeak = max(p.devPeak, f.devPeak, total(f.dev))
		p.hostPeak = max(p.hostPeak, f.hostPeak, total(f.host))
		if f.xfer {
			p.h2d, p.d2h, p.xfer = f.h2d, f.d2h, true
		}
	case runner.ChunkMoved:
		if e.Rank < 0 {
			return
		}
		p := c.rank(e.Rank)
		if e.ToDevice {
			p.h2d += e.Bytes
		} else {
			p.d2h += e.Bytes
		}
		p.xfer = true
	case runner.ChunkMoves: // another process's rank: its totals so far
		if e.Rank < 0 {
			return
		}
		p := c.rank(e.Rank)
		p.h2d, p.d2h, p.xfer = e.H2DBytes, e.D2HBytes, true
	}
}

// worst is the rank with the largest device peak (the one that decides
// whether a plugin fits, with its breakdown), and the largest host peak
// and traffic of any rank.
func (c *cmpStats) worst() rankPeak {
	w := rankPeak{xfer: c.gemini}
	for _, p := range c.ranks {
		if p.devPeak > w.devPeak {
			w.dev, w.devPeak = p.dev, p.devPeak
		}
		w.hostPeak = max(w.hostPeak, p.hostPeak)
		if p.xfer {
			w.h2d, w.d2h, w.xfer = max(w.h2d, p.h2d), max(w.d2h, p.d2h), true
		}
	}
	return w
}
