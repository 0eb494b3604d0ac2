package gemini

import (
	"sync"
	"sync/atomic"

	"resnetlab/kernels"
)

// gradCheck looks for inf and NaN in host gradient shards as soon as their
// offload completes, on another core while backward goes on, so the
// overflow vote after backward does not scan them on the critical path.
// The check only reads the shards; the vote waits for it (overflow), and
// so does anything that frees or overwrites them (settleAll).
type gradCheck struct {
	wg      sync.WaitGroup
	bad     atomic.Bool
	checked map[*kernels.Tensor]bool // shards whose check was started (main goroutine only)
}

// startGradCheck checks host gradient shard t in the background.
func (g *Gemini) startGradCheck(t *kernels.Tensor) {
	c := g.checking(t)
	go func() {
		defer c.Done()
		if g.host.NonFinite([]*kernels.Tensor{t}) {
			g.chk.bad.Store(true)
		}
	}()
}

// checking records that a background task checks shard t (a check of its
// own, or the shard's early Adam) and returns the group its end is
// reported to; the task stores a finding in g.chk.bad.
func (g *Gemini) checking(t *kernels.Tensor) *sync.WaitGroup {
	c := &g.chk
	if c.checked == nil {
		c.checked = map[*kernels.Tensor]bool{}
	}
	c.checked[t] = true
	c.wg.Add(1)
	return &c.wg
}

// waitGradChecks waits for the checks started this step and reports
// whether one found a non-finite value; unchecked filters hs to the shards
// no check covered.
func (g *Gemini) waitGradChecks(hs []*kernels.Tensor) (bad bool, unchecked []*kernels.Tensor) {
	c := &g.chk
	c.wg.Wait()
	for _, t := range hs {
		if !c.checked[t] {
			unchecked = append(unchecked, t)
		}
	}
	return c.bad.Load(), unchecked
}

// resetGradChecks starts a step's checks afresh (after waiting for any left).
func (g *Gemini) resetGradChecks() {
	c := &g.chk
	c.wg.Wait()
	c.bad.Store(false)
	clear(c.checked)
}
