package gemini

import (
	"fmt"
	"time"

	"resnetlab/engine"
	"resnetlab/kernels"
	sizes "resnetlab/spec" // "spec" is a name of this package's tests
)

// Step runs forward, backward (the hooks fetch, release and reduce chunks
// as it goes), the overflow vote and HybridAdam on one batch.
func (g *Gemini) Step(x, labels *kernels.Tensor, lr float32) (engine.StepStats, error) {
	g.beginStep()
	defer func() { g.training = false }()
	scale := g.tail.Scale()
	next := g.tail.AdamParams(lr, scale)
	next.Step++ // the step's Adam, if it counts (engine.Tail.Finish)
	g.beginEarly(next)
	var st engine.StepStats
	if g.tail.Scaler != nil {
		st.LossScale = g.tail.Scaler.Scale
	}
	logits := g.m.Forward(x, true)
	_, dlogits := g.ce.Forward(logits, labels, scale, true)
	g.m.Backward(dlogits)
	st.Loss = g.ce.Value()
	if err := g.endBackward(); err != nil {
		return st, err
	}
	g.finishOffloads() // the gradient shards sent to host memory, for the vote and Adam
	overflow, err := g.overflow()
	if err != nil {
		return st, err
	}
	st.Skipped = overflow
	err = g.tail.Finish(overflow, lr, scale, func(hp kernels.AdamParams) error {
		g.adam(hp)
		return nil
	}, g.freeGradShards)
	if err != nil {
		return st, err
	}
	return st, g.endStep()
}

func (g *Gemini) beginStep() {
	g.training, g.hook, g.offTrace = true, 0, false
	g.err, g.overNote, g.stepPeak = nil, "", 0
	g.beginMemStats()
	g.resetGradChecks()
	g.dev.ResetPeak()
	if g.tracing() {
		for _, c := range g.chunks {
			c.uses = c.uses[:0]
		}
	}
}

// endBackward closes the trace and checks that every chunk was reduced.
func (g *Gemini) endBackward() error {
	if g.tracing() {
		g.closeSegment(g.hook)
	}
	if g.err != nil {
		return g.err
	}
	for _, c := range g.chunks {
		if c.grad.on != Nowhere || c.opt.g == nil {
			return fmt.Errorf("gemini: chunk %d was not reduced after backward (first tensor %s is %s): a parameter got no gradient",
				c.id, c.tensors[0].name, c.tensors[0].state)
		}
	}
	return nil
}

// overflow votes over all ranks whether any gradient shard is inf or NaN.
func (g *Gemini) overflow() (bool, error) {
	devG, hostG := g.split(func(o *optGroup) *kernels.Tensor { return o.g })
	bad := len(devG) > 0 && g.dev.NonFinite(devG)
	checked, hostG := g.waitGradChecks(hostG)
	bad = bad || checked || (len(hostG) > 0 && g.host.NonFinite(hostG))
	return g.tail.Vote(bad)
}

// split lists pick(opt) of every chunk, device-resident ones first.
func (g *Gemini) split(pick func(*optGroup) *kernels.Tensor) (dev, host []*kernels.Tensor) {
	for _, c := range g.chunks {
		if c.opt.on == Device {
			dev = append(dev, pick(&c.opt))
		} else {
			host = append(host, pick(&c.opt))
		}
	}
	return dev, host
}

// adam is HybridAdam: one fused multi-tensor step over the optimizer
// chunks on the device with the device backend, then the chunks in host
// memory one by one with the CPU backend (on every core), each written back
// as soon as it is updated, so its upload runs on the copy stream while the
// host updates the next chunk. The update is element-wise, so neither where
// a chunk lives nor the grouping changes its arithmetic (on the CPU
// reference). Chunks go in order of first use: the next forward waits for
// the first ones first.
func (g *Gemini) adam(hp kernels.AdamParams) {
	var dp, dg, dm, dv []*kernels.Tensor
	for _, c := range g.chunks {
		if o := &c.opt; o.on == Device {
			dp, dg, dm, dv = append(dp, o.master), append(dg, o.g), append(dm, o.m), append(dv, o.v)
		}
	}
	if len(dp) > 0 { // issued first: a GPU runs it while the host works
		g.dev.AdamStep(dp, dg, dm, dv, hp)
	}
	t0 := time.Now()
	host := 0
	for _, c := range g.chunks {
		if o := &c.opt; o.on == Host {
			early := g.takeEarly(c, hp)
			if !early {
				g.settleWriteBack(o)
				g.host.AdamStep([]*kernels.Tensor{o.master}, []*kernels.Tensor{o.g}, []*kernels.Tensor{o.m}, []*kernels.Tensor{o.v}, hp)
			}
			if !early || !g.takeRounded(c) {
				g.writeBack(c)
			}
			host++
		}
	}
	g.ms.hostAdam += time.Since(t0)
	for _, c := range g.chunks {
		if c.opt.on == Device {
			g.writeBack(c)
		}
	}
	g.stats.DeviceAdam, g.stats.HostAdam = len(dp), host
}

// writeBack rounds c's updated master weights into its parameter chunk:
// the full payload of a replicated chunk, this rank's shard of a sharded
// one (whose payload is gathered again at its next use).
func (g *Gemini) writeBack(c *chunk) {
	if c.sharded && c.payload.on != Nowhere {
		panic(fmt.Sprintf("memory: sharded chunk %d still materialised at the optimizer step", c.id))
	}
	dst := wbSlot(c)
	g.ready(dst)
	g.dirty(dst)
	if dst.on == Device && c.opt.on == Host {
		g.uploadMaster(dst, &c.opt)
		return
	}
	g.transfer(dst.t, dst.on, c.opt.master, c.opt.on)
}

// wbSlot is where c's master weights are written back: the payload of a
// replicated chunk, this rank's shard of a sharded one.
func wbSlot(c *chunk) *slot {
	if c.sharded {
		return &c.shard
	}
	return &c.payload
}

// uploadMaster rounds host master weights into a device parameter slot
// through the mover: the copy stream converts them on the device while the
// host goes on (the next chunk's write-back, the next batch), and the
// slot's next user waits for the upload (ready), like a fetch's. The
// mover orders the copy after the compute work issued so far, so the
// backward kernels still reading the old weights come first.
func (g *Gemini) uploadMaster(dst *slot, o *optGroup) {
	mv := g.mv.UploadAsync(dst.t, o.master.Host)
	dst.pend = &pending{mv: mv}
	o.wb = mv
	g.stats.WriteBacks++
}

// settleWriteBack waits for o's last write-back to have read its master
// (long done by the next step: the forward awaited it).
func (g *Gemini) settleWriteBack(o *optGroup) {
	if o.wb != nil {
		g.mv.Finish(o.wb)
		o.wb = nil
	}
}

func (g *Gemini) freeGradShards() {
	g.early.wait() // early updates read the shards
	g.early.on = false
	for _, c := range g.chunks {
		o := &c.opt
		if o.on == Host && o.spareG == nil {
			o.spareG, o.g = o.g, nil
			continue
		}
		g.release(o.on, o.g)
		o.g = nil
	}
}

// hostGrad is a host gradient shard of n elements for c: the one kept from
// the last step when it has that size, else a new one.
func (g *Gemini) hostGrad(c *chunk, n int) *kernels.Tensor {
	o := &c.opt
	if t := o.spareG; t != nil {
		o.spareG = nil
		if t.Len() == n {
			return t
		}
		g.release(Host, t)
	}
	return g.allocRaw(Host, kernels.CatGrads, kernels.F32, n)
}

// endStep finishes the warm-up when due, checks the budget and reports.
func (g *Gemini) endStep() error {
	g.calls++
	g.notePeak(g.dev.MemStats().TotalPeak)
	g.stats.PeakDevice = max(g.stats.PeakDevice, g.stepPeak)
	warmup := !g.tr.done // this step ran conservatively (room.go)
	if !g.tr.done && g.calls >= g.cfg.WarmupSteps {
		g.tr.done = true
		g.stats.Traced = true
		g.stats.NonModelPeak = g.tr.nonModel
		g.placeAfterWarmup()
	}
	g.emitMemStats()
	g.emitChunks()
	if b := g.cfg.DeviceBudget; b > 0 && g.stepPeak > b {
		note := g.overNote
		if note == "" {
			note = "the traced statistics underestimated an operator"
		}
		return &BudgetError{Budget: b, Peak: g.stepPeak, Step: g.calls, Warmup: warmup, Note: note}
	}
	return nil
}

// BudgetError is a step whose device peak broke the device budget. A
// warm-up step keeps only each operator's own chunks on the device
// whatever the budget, so its peak does not depend on the budget: it is
// the smallest budget the warm-up fits (MinBudget). After the warm-up the
// placement depends on the budget, and no minimum is known.
type BudgetError struct {
	Budget, Peak int64
	Step         int    // 1-based Step call
	Warmup       bool   // the step was a warm-up (traced, conservative) step
	Note         string // where the budget could not be met
}

// MinBudget is the smallest device budget known to fit, 0 when unknown.
func (e *BudgetError) MinBudget() int64 {
	if e.Warmup {
		return e.Peak
	}
	return 0
}

func (e *BudgetError) Error() string {
	msg := fmt.Sprintf("gemini: device budget %s exceeded: peak %s in step %d (%s); activations and one operator's chunks must fit",
		sizeOf(e.Budget), sizeOf(e.Peak), e.Step, e.Note)
	if m := e.MinBudget(); m > 0 {
		msg += fmt.Sprintf(": the warm-up needs a device budget of at least %s", sizeOf(m))
	}
	return msg
}

// formatSize is n bytes with a binary unit, as resnetlab writes sizes
// elsewhere (spec.FormatSize): "22.72 MiB".
func formatSize(n int64) string { return sizes.FormatSize(n) }

// sizeOf is formatSize with the exact count: "22.72 MiB (23822754 B)".
func sizeOf(n int64) string {
	s := formatSize(n)
	if exact := fmt.Sprintf("%d B", n); s != exact {
		s += " (" + exact + ")"
	}
	return s
}
