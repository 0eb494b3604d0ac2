package engine

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"resnetlab/kernels"
	"resnetlab/model"

	"resnetlab/internal/testutil"
)

// sameState returns "" when two states are equal bit for bit (parameters,
// buffers, Adam moments, step, loss scale), else the first difference.
func sameState(a, b *State) string {
	if a.Step != b.Step {
		return fmt.Sprintf("step %d vs %d", a.Step, b.Step)
	}
	if (a.Scaler == nil) != (b.Scaler == nil) || a.Scaler != nil && *a.Scaler != *b.Scaler {
		return fmt.Sprintf("loss scaler %+v vs %+v", a.Scaler, b.Scaler)
	}
	for i := range a.Model {
		if err := testutil.DiffBits(a.Model[i].Name, a.Model[i].Data, b.Model[i].Data); err != nil {
			return err.Error()
		}
	}
	for i := range a.ExpAvg {
		if err := testutil.DiffBits(fmt.Sprintf("exp_avg of param %d", i), a.ExpAvg[i], b.ExpAvg[i]); err != nil {
			return err.Error()
		}
		if err := testutil.DiffBits(fmt.Sprintf("exp_avg_sq of param %d", i), a.ExpAvgSq[i], b.ExpAvgSq[i]); err != nil {
			return err.Error()
		}
	}
	return ""
}

func TestOverlapEqualsNoOverlap(t *testing.T) {
	scaler := ScalerConfig{InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1000, Hysteresis: 2}
	cases := []struct {
		name  string
		accum int
		eng   EngineConfig
	}{
		{"ddp-fp32", 1, EngineConfig{Plugin: TorchDDP, Precision: kernels.F32, BucketElems: 5000}},
		{"ddp-fp32-accum", 2, EngineConfig{Plugin: TorchDDP, Precision: kernels.F32, BucketElems: 5000}},
		{"ddp-fp16-accum", 2, EngineConfig{Plugin: TorchDDP, Precision: kernels.F16, Scaler: scaler, BucketElems: 7000}},
		{"zero1-bf16", 1, EngineConfig{Plugin: LowLevelZero, ZeroStage: 1, Precision: kernels.BF16, BucketElems: 6000}},
		{"zero2-fp16", 1, EngineConfig{Plugin: LowLevelZero, ZeroStage: 2, Precision: kernels.F16, Scaler: scaler, BucketElems: 6000}},
	}
	for _, tc := range cases {
		for _, world := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/world=%d", tc.name, world), func(t *testing.T) {
				cfg := trainCfg{world: world, batch: 8, steps: 3, accum: tc.accum, lr: 2e-3, eng: tc.eng}
				cfg.setup = func(e *Engine, rank int) {
					if e.red == nil || !e.async {
						t.Errorf("rank %d: CPU engine does not overlap (hooks %v, async %v)", rank, e.red != nil, e.async)
					}
				}
				over, _ := train(t, cfg)
				cfg.eng.NoOverlap, cfg.setup = true, nil
				after, _ := train(t, cfg)
				for r := range over {
					if d := sameState(over[r], after[r]); d != "" {
						t.Fatalf("rank %d: overlapped reduction differs from reduction after backward: %s", r, d)
					}
				}
			})
		}
	}
}

func TestOverlapWithoutHooksStillReduces(t *testing.T) {
	// Hooks replaced by someone else: no bucket completes during backward,
	// so all are reduced right after it, and the result must not change.
	ddp := EngineConfig{Plugin: TorchDDP, Precision: kernels.F32, BucketElems: 5000}
	cfg := trainCfg{world: 2, batch: 8, steps: 2, lr: 2e-3, eng: ddp}
	cfg.setup = func(e *Engine, _ int) { e.Model().SetHooks(nil) }
	lost, _ := train(t, cfg)
	cfg.setup = nil
	ok, _ := train(t, cfg)
	if d := sameState(lost[0], ok[0]); d != "" {
		t.Fatalf("without hooks: %s", d)
	}
}

// tracer records one rank's backward and bucket events. At waitAt (the
// last layer's backward) it blocks until the first launched bucket's
// collective is done: that completes only if the collective runs while
// backward is still going on.
type tracer struct {
	mu        sync.Mutex
	events    []string
	first     string // "reduced K" for the first launched bucket K
	firstDone chan struct{}
	waitAt    string
	timedOut  bool
}

func newTracer(waitAt string) *tracer { return &tracer{firstDone: make(chan struct{}), waitAt: waitAt} }

func (tr *tracer) record(ev string) {
	tr.mu.Lock()
	tr.events = append(tr.events, ev)
	if k, ok := strings.CutPrefix(ev, "launch "); ok && tr.first == "" {
		tr.first = "reduced " + k
	}
	if ev == tr.first {
		close(tr.firstDone)
	}
	tr.mu.Unlock()
	if ev != tr.waitAt {
		return
	}
	select {
	case <-tr.firstDone:
	case <-time.After(10 * time.Second):
		tr.mu.Lock()
		tr.timedOut = true
		tr.mu.Unlock()
	}
}

// checkPrompt checks that every bucket was launched after the backward of
// every layer with a parameter in it began, and before the backward of the
// layer that follows the last of them: as soon as it was complete.
// layerBuckets maps a layer to the buckets its parameters overlap.
func (tr *tracer) checkPrompt(layerBuckets map[string][]int) error {
	last := map[int]int{}     // bucket -> event index of its last layer's backward
	launched := map[int]int{} // bucket -> event index of its launch
	var backwards []int       // event indices of backward events
	for i, ev := range tr.events {
		if name, ok := strings.CutPrefix(ev, "backward "); ok {
			backwards = append(backwards, i)
			for _, k := range layerBuckets[name] {
				last[k] = i
			}
		}
		if k, ok := strings.CutPrefix(ev, "launch "); ok {
			n, _ := strconv.Atoi(k)
			launched[n] = i
		}
	}
	for k, at := range last {
		l, ok := launched[k]
		if !ok {
			return fmt.Errorf("bucket %d never launched", k)
		}
		next := len(tr.events)
		if j := sort.SearchInts(backwards, at+1); j < len(backwards) {
			next = backwards[j]
		}
		if l < at || l > next {
			return fmt.Errorf("bucket %d launched at event %d, want between its last layer's backward (%d) and the next backward (%d)", k, l, at, next)
		}
	}
	if len(launched) != len(last) {
		return fmt.Errorf("%d buckets launched, %d have parameters", len(launched), len(last))
	}
	return nil
}

// launches lists the launched buckets in order.
func (tr *tracer) launches() []int {
	var ks []int
	for _, ev := range tr.events {
		if k, ok := strings.CutPrefix(ev, "launch "); ok {
			n, _ := strconv.Atoi(k)
			ks = append(ks, n)
		}
	}
	return ks
}

// layerBuckets maps each parametrised layer of e's model to the buckets of
// bucketLen flat elements that its parameters overlap, placing parameters
// end to end in state-dict order.
func layerBuckets(e *Engine, bucketLen int) map[string][]int {
	off := map[*model.Param]int{}
	n := 0
	for _, p := range e.Model().Params() {
		off[p] = n
		n += p.W.Len()
	}
	lb := map[string][]int{}
	for _, l := range e.Model().Layers() {
		for _, p := range l.Params() {
			for k := off[p] / bucketLen; k <= (off[p]+p.W.Len()-1)/bucketLen; k++ {
				lb[l.Name()] = append(lb[l.Name()], k)
			}
		}
	}
	return lb
}

func TestBucketsReducedDuringBackward(t *testing.T) {
	const last = "backward conv1" // conv1 is the last layer of backward
	for _, eng := range []EngineConfig{
		{Plugin: TorchDDP, Precision: kernels.F32, BucketElems: 5000},
		{Plugin: LowLevelZero, ZeroStage: 2, Precision: kernels.F16, BucketElems: 5000,
			Scaler: ScalerConfig{InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1000}},
	} {
		t.Run(eng.Plugin, func(t *testing.T) {
			const world = 2
			tracers := []*tracer{newTracer(last), newTracer(last)}
			var lb map[string][]int
			cfg := trainCfg{world: world, batch: 8, steps: 1, lr: 1e-3, eng: eng}
			cfg.setup = func(e *Engine, rank int) {
				e.trace, e.red.trace = tracers[rank].record, tracers[rank].record
				if rank == 0 {
					lb = layerBuckets(e, e.lay.bucketLen())
				}
			}
			train(t, cfg)
			top := slices.Max(lb["fc"]) // the last bucket: fc's backward completes it
			if len(lb["conv1"]) != 1 || top < 3 {
				t.Fatalf("conv1 in buckets %v, fc in %v: the test needs several buckets", lb["conv1"], lb["fc"])
			}
			for r, tr := range tracers {
				if tr.timedOut {
					t.Fatalf("rank %d: the first launched bucket was not reduced before %q: no overlap; events %v", r, last, tr.events)
				}
				if err := tr.checkPrompt(lb); err != nil {
					t.Errorf("rank %d: %v; events %v", r, err, tr.events)
				}
				if got, want := fmt.Sprint(tr.launches()), fmt.Sprint(tracers[0].launches()); got != want {
					t.Errorf("rank %d launched buckets in order %s, rank 0 in %s", r, got, want)
				}
			}
			if ks := tracers[0].launches(); ks[0] != top || ks[len(ks)-1] != lb["conv1"][0] {
				t.Errorf("launch order %v: want fc's bucket %d first and conv1's %d last", ks, top, lb["conv1"][0])
			}
		})
	}
}
