package runner

import (
	"context"
	"strings"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/graphtest"
)

// countingBackend is a CPU backend that "profiles" its convolutions: one
// record and one launch per Conv2dForward, so Bench's plumbing can be
// checked without a GPU.
type countingBackend struct {
	kernels.Backend
	on   bool
	recs []kernels.OpRecord
	cnt  kernels.Counters
}

func (c *countingBackend) Conv2dForward(y, x, w *kernels.Tensor, p kernels.ConvParams) {
	c.cnt.Launches++
	if c.on {
		c.recs = append(c.recs, kernels.OpRecord{Op: "Conv2dForward", Key: kernels.ShapeKey(x, w), MS: 0.01,
			Counters: kernels.Counters{Launches: 1}})
	}
	c.Backend.Conv2dForward(y, x, w, p)
}

func (c *countingBackend) StartProfile() { c.on, c.recs = true, nil }
func (c *countingBackend) StopProfile() ([]kernels.OpRecord, error) {
	c.on = false
	return c.recs, nil
}
func (c *countingBackend) Counters() kernels.Counters { return c.cnt }

func TestBenchProfileAndCounters(t *testing.T) {
	benchWrap = func(be kernels.Backend) kernels.Backend { return &countingBackend{Backend: be} }
	defer func() { benchWrap = nil }()
	o := BenchOptions{Device: "cpu", Width: 4, Batch: 2, Steps: 2, Warmup: 1, Precisions: []string{"fp16"},
		Plugin: "torch_ddp", Profile: 3}
	res, err := Bench(context.Background(), o)
	if err != nil || len(res) != 1 {
		t.Fatalf("Bench: %v, %d results", err, len(res))
	}
	r := res[0]
	const convs = 20 // ResNet-18: stem, 16 in the blocks, 3 downsamples
	if r.Steps != 2 || r.Counters.Launches != 2*convs {
		t.Errorf("counters over the timed steps: %+v for %d steps, want %d launches", r.Counters, r.Steps, 2*convs)
	}
	if r.ProfileSteps != 3 || len(r.Profile) != 3*convs || r.ProfileWallMS <= 0 {
		t.Fatalf("profile: %d steps, %d records, wall %g ms", r.ProfileSteps, len(r.Profile), r.ProfileWallMS)
	}
	if st := kernels.Aggregate(r.Profile, true); len(st) < 5 || st[0].Calls%3 != 0 {
		t.Errorf("per-shape rows: %+v", st)
	}
}

func TestBenchProfileNeedsProfiler(t *testing.T) {
	o := BenchOptions{Device: "cpu", Width: 4, Batch: 2, Steps: 1, Warmup: 0, Precisions: []string{"fp32"},
		Plugin: "torch_ddp", Profile: 1}
	_, err := Bench(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "--profile needs") {
		t.Fatalf("profiling the CPU backend: %v", err)
	}
}

func TestBenchGraphsSameState(t *testing.T) {
	o := BenchOptions{Device: "cpu", Width: 4, Batch: 2, Steps: 2, Warmup: 3, Precisions: []string{"fp32", "fp16"},
		Plugin: "torch_ddp", Graphs: true}
	if _, err := Bench(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--graphs needs a backend") {
		t.Fatalf("--graphs on the CPU backend: %v", err)
	}
	benchWrap = func(be kernels.Backend) kernels.Backend { return graphtest.New(be) }
	defer func() { benchWrap = nil }()
	res, err := Bench(context.Background(), o)
	if err != nil || len(res) != 4 {
		t.Fatalf("Bench: %v, %d results, want 4", err, len(res))
	}
	for i := 0; i < 4; i += 2 {
		e, g := res[i], res[i+1]
		if e.Graphs || !g.Graphs || e.StateSHA == "" || e.StateSHA != g.StateSHA {
			t.Errorf("%s: eager %v %q, graph %v %q", e.Precision, e.Graphs, e.StateSHA, g.Graphs, g.StateSHA)
		}
	}
	if res[0].StateSHA == res[2].StateSHA {
		t.Error("fp32 and fp16 states have one digest: the digest does not see the weights")
	}
	o.Warmup = 2
	if _, err := Bench(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--warmup > 2") {
		t.Errorf("--graphs with 2 warm-up steps: %v", err)
	}
}
