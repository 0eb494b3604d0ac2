//go:build gpu

package gemini

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"resnetlab/comm"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

// TestGPUBudgetBreakdown logs where a budgeted step's time goes: per
// steady-state step (after warm-up and the first planned step) the chunk
// moves by part and direction, the gradient offloads, the blocking
// uploads and downloads, the host waits for offloads, the host Adam and
// the stalls, at 1/2 and 1/4 of the unbudgeted peak (ResNet-18, batch 100).
// Where a fraction does not fit (the activations and workspaces depend on
// the GPU), it runs at the failed step's peak plus 1/16 instead and says so.
func TestGPUBudgetBreakdown(t *testing.T) {
	dev := gpuDevice(t)
	base := gpuConfig(Auto)
	peak, err := breakdownRun(t, dev, base, "unlimited")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []int64{2, 4} {
		c := base
		c.DeviceBudget = peak / f
		name := fmt.Sprintf("1/%d", f)
		_, err := breakdownRun(t, dev, c, name)
		var be *BudgetError
		if errors.As(err, &be) {
			c.DeviceBudget = max(be.MinBudget(), be.Peak+be.Peak/16)
			t.Logf("%s does not fit this GPU (%v); measured at %d B instead", name, err, c.DeviceBudget)
			_, err = breakdownRun(t, dev, c, fmt.Sprintf("%s raised to %.1f MiB", name, mib(c.DeviceBudget)))
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// timedBackend times the blocking transfers and Finish waits of a device
// backend, and AdamStep of a host backend.
type timedBackend struct {
	*watchBackend
	up, down, finish, adam time.Duration
	copy, copyB            atomic.Int64 // Copy (ns, bytes): on the host, write-backs into host payloads (some on early-update goroutines)
	upB, downB             int64
	issue                  time.Duration // async move issue (host staging copies)
	nonFinite              atomic.Int64  // ns in NonFinite (on the device: a sync); host checks run on several goroutines
	early                  atomic.Int64  // ns in early host Adam updates (in the background, during backward)
}

func (w *timedBackend) AdamStepTo(po, mo, vo, p, grad, m, v *kernels.Tensor, hp kernels.AdamParams) bool {
	s := time.Now()
	bad := w.watchBackend.AdamStepTo(po, mo, vo, p, grad, m, v, hp)
	w.early.Add(int64(time.Since(s)))
	return bad
}

func (w *timedBackend) NonFinite(ts []*kernels.Tensor) bool {
	s := time.Now()
	r := w.watchBackend.NonFinite(ts)
	w.nonFinite.Add(int64(time.Since(s)))
	return r
}

func (w *timedBackend) Upload(t *kernels.Tensor, src []float32) {
	s := time.Now()
	w.watchBackend.Upload(t, src)
	w.up += time.Since(s)
	w.upB += t.Bytes()
}

func (w *timedBackend) Download(t *kernels.Tensor, dst []float32) {
	s := time.Now()
	w.watchBackend.Download(t, dst)
	w.down += time.Since(s)
	w.downB += t.Bytes()
}

func (w *timedBackend) Finish(m kernels.Move) {
	s := time.Now()
	w.watchBackend.Finish(m)
	w.finish += time.Since(s)
}

func (w *timedBackend) Await(m kernels.Move) { w.watchBackend.Await(m) }

func (w *timedBackend) UploadAsync(dst *kernels.Tensor, src []float32) kernels.Move {
	s := time.Now()
	defer func() { w.issue += time.Since(s) }()
	return w.watchBackend.UploadAsync(dst, src)
}

func (w *timedBackend) DownloadAsync(src *kernels.Tensor, dst []float32) kernels.Move {
	s := time.Now()
	defer func() { w.issue += time.Since(s) }()
	return w.watchBackend.DownloadAsync(src, dst)
}

func (w *timedBackend) AdamStep(p, g, m, v []*kernels.Tensor, hp kernels.AdamParams) {
	s := time.Now()
	w.watchBackend.AdamStep(p, g, m, v, hp)
	w.adam += time.Since(s)
}

func (w *timedBackend) Copy(dst, src *kernels.Tensor) {
	s := time.Now()
	w.watchBackend.Copy(dst, src)
	w.copy.Add(int64(time.Since(s)))
	w.copyB.Add(dst.Bytes())
}

func (w *timedBackend) reset() {
	w.up, w.down, w.finish, w.adam, w.upB, w.downB, w.issue = 0, 0, 0, 0, 0, 0, 0
	w.copy.Store(0)
	w.copyB.Store(0)
	w.nonFinite.Store(0)
	w.early.Store(0)
}

func breakdownRun(t *testing.T, dev kernels.Backend, cfg Config, name string) (int64, error) {
	w := &timedBackend{watchBackend: &watchBackend{Backend: dev, budget: cfg.DeviceBudget}}
	h := &timedBackend{watchBackend: &watchBackend{Backend: cpu.New()}}
	moves := map[string]int64{}
	steady := false
	var ms MemStatsEvent // sums over the steady steps
	cfg.OnEvent = func(e any) {
		if e, ok := e.(MemStatsEvent); ok && steady {
			ms.H2DBytes += e.H2DBytes
			ms.D2HBytes += e.D2HBytes
			ms.Evictions += e.Evictions
			ms.EvictTime += e.EvictTime
			ms.HostAdam += e.HostAdam
			ms.OffloadWait += e.OffloadWait
		}
		if mv, ok := e.(MoveEvent); ok && steady {
			k := fmt.Sprintf("%s %s->%s", mv.Part, mv.From, mv.To)
			moves[k+" n"]++
			moves[k+" B"] += mv.Bytes
		}
	}
	m := model.NewResNet18(w, model.Config{Width: 64, InChannels: 3, NumClasses: 10, DType: kernels.F16, Seed: 5})
	g, err := New(w, h, comm.NewHostTensorComm(comm.NewGroup(1).Comm(0)), m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	defer g.Free()
	const batch, steps, first = 100, 12, 2
	x, y := batchOf(w, kernels.F16, batch, 0, 0, 1)
	defer w.Free(x)
	defer w.Free(y)
	w.arm()
	var start time.Time
	var st0 Stats
	for s := range steps {
		if s == first {
			_ = dev.Sync()
			start, steady, st0 = time.Now(), true, g.Stats()
			w.reset()
			h.reset()
		}
		if _, err := g.Step(x, y, 1e-3); err != nil {
			return 0, fmt.Errorf("step %d: %w", s, err)
		}
	}
	_ = dev.Sync()
	el := time.Since(start)
	if p, ok := dev.(kernels.Profiler); ok {
		p.StartProfile()
		for range 2 {
			if _, err := g.Step(x, y, 1e-3); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := p.StopProfile()
		if err == nil {
			var sb strings.Builder
			kernels.WriteProfile(&sb, name+" ops", kernels.Aggregate(recs, false), 2, 25)
			t.Log("\n" + sb.String())
		}
	}
	n := float64(steps - first)
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	st := g.Stats()
	var b strings.Builder
	for k, v := range moves {
		if strings.HasSuffix(k, " n") {
			kk := strings.TrimSuffix(k, " n")
			fmt.Fprintf(&b, " [%s: %.1f/step %.1f MiB/step]", kk, float64(v)/n, mib(moves[kk+" B"])/n)
		}
	}
	t.Logf("%-9s budget %6.1f MiB: %7.2f ms/step, peak %6.1f MiB; per step: host Adam %.2f ms (%d host / %d device chunks), blocking upload %.2f ms %.1f MiB, blocking download %.2f ms %.1f MiB, offload waits %.2f ms, grad offloads %.1f, stalls %.1f, moves %.1f (%.1f MiB)%s",
		name, mib(cfg.DeviceBudget), per(el), mib(w.Peak()), per(h.adam), st.HostAdam, st.DeviceAdam,
		per(w.up), mib(w.upB)/n, per(w.down), mib(w.downB)/n, per(w.finish),
		float64(st.GradOffloads-st0.GradOffloads)/n, float64(st.Stalls-st0.Stalls)/n,
		float64(st.Moves-st0.Moves)/n, mib(st.BytesMoved-st0.BytesMoved)/n, b.String())
	t.Logf("%s: per step: host copies (write-backs into host payloads) %.2f ms %.1f MiB, %.1f of them by early updates",
		name, per(time.Duration(h.copy.Load())), mib(h.copyB.Load())/n, float64(st.EarlyWriteBacks-st0.EarlyWriteBacks)/n)
	t.Logf("%s: per step: async issue %.2f ms, device NonFinite (waits for the GPU) %.2f ms, host NonFinite %.2f ms and early host Adam %.2f ms (on other goroutines), %d early updates",
		name, per(w.issue), per(time.Duration(w.nonFinite.Load())), per(time.Duration(h.nonFinite.Load())), per(time.Duration(h.early.Load())),
		st.EarlyAdam-st0.EarlyAdam)
	t.Logf("%s: memstats per step: h2d %.1f MiB, d2h %.1f MiB (chunk parts), evictions %.1f (%.2f ms), host Adam after the vote (waits for early updates, write-back issue) %.2f ms, offload waits %.2f ms",
		name, mib(ms.H2DBytes)/n, mib(ms.D2HBytes)/n, float64(ms.Evictions)/n, per(ms.EvictTime), per(ms.HostAdam), per(ms.OffloadWait))
	if w.over > 0 {
		t.Errorf("%s: %d allocations over the budget", name, w.over)
	}
	return w.Peak(), nil
}

// TestGPUMoverBandwidth times the mover's copies of one 44 MiB chunk-sized
// tensor each way, fp32 and fp16, and the blocking Upload/Download.
func TestGPUMoverBandwidth(t *testing.T) {
	dev := gpuDevice(t)
	const n = 11 << 20
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(i%1000) / 7
	}
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16} {
		x := dev.New(kernels.CatWorkspace, dt, n)
		for r := range 3 {
			s := time.Now()
			dev.Finish(dev.UploadAsync(x, host))
			up := time.Since(s)
			s = time.Now()
			dev.Finish(dev.DownloadAsync(x, host))
			down := time.Since(s)
			s = time.Now()
			dev.Upload(x, host)
			bup := time.Since(s)
			s = time.Now()
			dev.Download(x, host)
			bdown := time.Since(s)
			s = time.Now()
			cp := make([]float32, n)
			copy(cp, host)
			hc := time.Since(s)
			gb := func(d time.Duration) float64 { return float64(x.Bytes()) / d.Seconds() / 1e9 }
			t.Logf("%s round %d (%d B on device): async up %v (%.1f GB/s of device bytes), async down %v (%.1f), blocking up %v (%.1f), down %v (%.1f); host copy of %d B %v",
				dt, r, x.Bytes(), up, gb(up), down, gb(down), bup, gb(bup), bdown, gb(bdown), 4*n, hc)
		}
		dev.Free(x)
	}
}
