package gemini

// Placement policies decide where chunks rest; the budget logic (room.go)
// then moves parameter data around each operator as memory requires.
//
//   - static: the first chunks making up OffloadParamFrac of the chunk
//     bytes have their parameters homed in host memory (fetched for each
//     use, sent back after it unless prefetch wants them again within its
//     window), and the first chunks making up
//     OffloadOptimFrac keep their optimizer chunk (fp32 master, moments)
//     in host memory, so Adam runs there for them; the rest is on the
//     device. Fixed for the whole run.
//   - auto: parameters are homed on the device and evicted on demand.
//     Optimizer chunks start in host memory; after warm-up as many as fit
//     into GPUMarginMemRatio x (budget - traced non-model peak - this
//     rank's parameter bytes - one operator's working set) move to the
//     device (ColossalAI's gpu_margin_mem_ratio).
//
// With a budget, every chunk's parameters start in host memory: step 1 runs
// conservatively (only the operator's chunks on the device).

// placeInitial sets every chunk's home and where its parts are created.
func (g *Gemini) placeInitial() {
	total := int64(0)
	for _, c := range g.chunks {
		total += c.payloadBytes()
	}
	offParam := int64(float64(total) * g.cfg.OffloadParamFrac)
	offOptim := int64(float64(total) * g.cfg.OffloadOptimFrac)
	var paramDone, optimDone int64
	for _, c := range g.chunks {
		c.home, c.opt.on = Device, Device
		if g.cfg.Placement == Static {
			if paramDone < offParam {
				c.home = Host
				paramDone += c.payloadBytes()
			}
			if optimDone < offOptim {
				c.opt.on = Host
				optimDone += c.payloadBytes()
			}
		} else if g.budget() > 0 {
			c.opt.on = Host
		}
		at := c.home
		if g.cfg.DeviceBudget > 0 {
			at = Host
		}
		if c.sharded {
			c.shard.on = at
		} else {
			c.payload.on = at
		}
	}
}

// budget is the device memory auto placement plans for: the configured
// budget, else the device's capacity, else 0 (unbounded).
func (g *Gemini) budget() int64 {
	if g.cfg.DeviceBudget > 0 {
		return g.cfg.DeviceBudget
	}
	return g.dev.MemStats().Capacity
}

// placeAfterWarmup applies auto placement once the statistics exist.
func (g *Gemini) placeAfterWarmup() {
	if g.cfg.Placement != Auto {
		return
	}
	margin := int64(-1) // unbounded
	if b := g.budget(); b > 0 {
		var params int64
		for _, c := range g.chunks {
			params += c.ownBytes()
		}
		free := b - g.tr.nonModel - params - g.workingSet()
		margin = int64(g.cfg.GPUMarginMemRatio * float64(max(free, 0)))
	}
	var used int64
	for _, c := range g.chunks {
		if margin < 0 || used+c.optBytes() <= margin {
			used += c.optBytes()
			g.moveOpt(c, Device)
		} else {
			g.moveOpt(c, Host)
		}
	}
}

// workingSet bounds the chunk bytes one operator needs at once beyond the
// resting parameters: the full payload and gradient buffer of its chunks
// (at most the two largest) and the fp32 staging of a reduction.
func (g *Gemini) workingSet() int64 {
	var a, b, staging int64
	for _, c := range g.chunks {
		n := 2 * c.payloadBytes()
		switch {
		case n > a:
			a, b = n, a
		case n > b:
			b = n
		}
		staging = max(staging, 4*int64(c.size))
	}
	return a + b + staging
}
