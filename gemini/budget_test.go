package gemini

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"resnetlab/engine"
	"resnetlab/kernels"
)

// budgetBase is the small-batch run the budget tests scale: at batch 2 the
// activations are a small part of the training footprint, so budgets of 1/2
// and 1/4 of the unbudgeted peak are below the model's footprint yet
// feasible. Chunks of one layer4 conv (36864 elements) keep one operator's
// working set small.
func budgetBase(world int, placement string) runSpec {
	return runSpec{world: world, batch: 2, steps: 3, lr: 2e-3, gem: Config{Precision: kernels.F16,
		Scaler: testScaler, Placement: placement, ChunkElems: 36864, ShardParamFrac: 1, GPUMarginMemRatio: 0.8}}
}

// withBudget sets the budget and, for static placement, the offload
// fractions a small budget needs (static does not adapt by itself).
func withBudget(spec runSpec, budget int64, frac int) runSpec {
	spec.gem.DeviceBudget = budget
	if spec.gem.Placement == Static && frac == 4 {
		spec.gem.OffloadOptimFrac = 1
	}
	if spec.gem.Placement == Static && frac == 2 {
		spec.gem.OffloadOptimFrac, spec.gem.OffloadParamFrac = 0.75, 0.25
	}
	return spec
}

func TestBudgetedRunsMatchUnbudgeted(t *testing.T) {
	for _, world := range []int{1, 2} {
		base := runGemini(t, budgetBase(world, Auto))
		ddp := runEngine(t, budgetBase(world, Auto), engine.EngineConfig{Plugin: engine.TorchDDP, Precision: kernels.F16, Scaler: testScaler})
		full := base[0].peak
		var model int64
		for _, c := range chunkInfos(t, world) {
			model += c
		}
		if full/4 < base[0].stats.NonModelPeak || full/4 > model {
			t.Fatalf("world %d: 1/4 of the peak (%d B) must lie between the non-model peak %d B and the model's %d B",
				world, full/4, base[0].stats.NonModelPeak, model)
		}
		if d := stateDiff(ddp[0], base[0].state); d != "" {
			t.Fatalf("world %d: unbudgeted Gemini differs from DDP: %s", world, d)
		}
		for _, placement := range []string{Auto, Static} {
			for _, frac := range []int{2, 4} {
				name := fmt.Sprintf("world %d %s 1/%d", world, placement, frac)
				budget := full / int64(frac)
				got := runGemini(t, withBudget(budgetBase(world, placement), budget, frac))
				for r, res := range got {
					checkBudgetRun(t, fmt.Sprintf("%s rank %d", name, r), budget, res, base[r])
				}
				st := got[0].stats
				t.Logf("%s: budget %d B, peak %d B, %d moves (%d B), %d gathers, Adam on device/host %d/%d",
					name, budget, got[0].peak, st.Moves, st.BytesMoved, st.Gathers, st.DeviceAdam, st.HostAdam)
				if frac == 2 && (st.DeviceAdam == 0 || st.HostAdam == 0) {
					t.Errorf("%s: Adam ran on %d device and %d host chunks: want both sides (HybridAdam)", name, st.DeviceAdam, st.HostAdam)
				}
			}
		}
	}
}

// chunkInfos is the training footprint of the model's chunks on one rank
// (parameters, gradients, master weights and moments), for the
// feasibility check.
func chunkInfos(t *testing.T, world int) []int64 {
	spec := budgetBase(world, Auto)
	spec.steps = 1
	res := runGemini(t, spec)
	var out []int64
	for _, c := range res[0].chunks {
		out = append(out, 2*c.Bytes+16*int64(c.Elems/world))
	}
	return out
}

func checkBudgetRun(t *testing.T, name string, budget int64, got, base rankResult) {
	t.Helper()
	if got.over > 0 || got.peak > budget {
		t.Errorf("%s: device peak %d B over the budget %d B (%d allocations over)", name, got.peak, budget, got.over)
	}
	if d := stateDiff(base.state, got.state); d != "" {
		t.Errorf("%s: differs from the unbudgeted run: %s", name, d)
	}
	for i := range base.logits {
		if base.logits[i] != got.logits[i] {
			t.Fatalf("%s: eval logits differ at %d: %g vs %g", name, i, got.logits[i], base.logits[i])
		}
	}
	if got.stats.Moves == 0 || got.events["gemini.MoveEvent"] != got.stats.Moves+got.stats.CleanDrops || got.events["gemini.StateChange"] == 0 {
		t.Errorf("%s: %d moves and %d clean drops, events %v", name, got.stats.Moves, got.stats.CleanDrops, got.events)
	}
	var bytes int64
	for _, mv := range got.moves {
		bad := mv.From == mv.To || mv.From == Nowhere || mv.To == Nowhere || mv.Bytes <= 0
		if mv.Clean { // a payload leaving the device with nothing to copy
			bad = mv.Part != PartPayload || mv.From != Device || mv.To != Host || mv.Bytes != 0
		}
		if bad {
			t.Fatalf("%s: bad move event %+v", name, mv)
		}
		bytes += mv.Bytes
	}
	if bytes != got.stats.BytesMoved {
		t.Errorf("%s: move events add up to %d B, stats say %d B", name, bytes, got.stats.BytesMoved)
	}
	if n, want := got.events["gemini.ChunksEvent"]-got.events["mid"], len(got.steps)+1; n != want { // New and every step
		t.Errorf("%s: %d resting chunk events, want %d", name, n, want)
	}
}

func TestInfeasibleBudgetIsAnError(t *testing.T) {
	spec := budgetBase(1, Auto)
	base := runGemini(t, spec)
	spec.gem.DeviceBudget = base[0].stats.NonModelPeak / 2
	_, err := runGeminiErr(spec)
	if err == nil || !strings.Contains(err.Error(), "device budget") || !strings.Contains(err.Error(), "non-model") {
		t.Fatalf("budget below the activations: got %v, want a device budget error naming the non-model bytes", err)
	}
	// The warm-up's peak does not depend on the budget: it is the minimum.
	var be *BudgetError
	if !errors.As(err, &be) || !be.Warmup || be.Step != 1 || be.MinBudget() != be.Peak {
		t.Fatalf("%v: want a *BudgetError of warm-up step 1 whose minimum is its peak", err)
	}
	spec.gem.DeviceBudget = be.MinBudget()
	if _, err := runGeminiErr(spec); err != nil {
		t.Fatalf("budget %d B, the minimum the error named: %v", spec.gem.DeviceBudget, err)
	}
}

// The budget error writes its byte counts as resnetlab writes sizes
// elsewhere (spec.FormatSize, then the exact count), on one line.
func TestBudgetErrorSizes(t *testing.T) {
	e := &BudgetError{Budget: 23822754, Peak: 34508996, Step: 1, Warmup: true, Note: "after pre-bwd conv1 the device reached 32.91 MiB"}
	want := "gemini: device budget 22.72 MiB (23822754 B) exceeded: peak 32.91 MiB (34508996 B) in step 1 " +
		"(after pre-bwd conv1 the device reached 32.91 MiB); activations and one operator's chunks must fit: " +
		"the warm-up needs a device budget of at least 32.91 MiB (34508996 B)"
	if got := e.Error(); got != want {
		t.Errorf("warm-up step:\n got %q\nwant %q", got, want)
	}
	e = &BudgetError{Budget: 1000, Peak: 5 << 20, Step: 9, Note: "n"}
	want = "gemini: device budget 1000 B exceeded: peak 5.00 MiB (5242880 B) in step 9 (n); activations and one operator's chunks must fit"
	if got := e.Error(); got != want {
		t.Errorf("later step:\n got %q\nwant %q", got, want)
	}
}

// A longer warm-up traces more steps (conservatively) and still computes
// the same numbers; the host accounting sees the offloaded chunks.
func TestLongerWarmup(t *testing.T) {
	spec := budgetBase(1, Auto)
	base := runGemini(t, spec)[0]
	spec.gem.WarmupSteps = 2
	spec.gem.DeviceBudget = base.peak / 3
	got := runGemini(t, spec)[0]
	checkBudgetRun(t, "warm-up 2", spec.gem.DeviceBudget, got, base)
	if !got.stats.Traced || got.stats.NonModelPeak <= 0 {
		t.Fatalf("stats %+v: want the trace finished", got.stats)
	}
	// One rank, nothing sharded: each eviction sends at least one part home.
	var evictions, toHost int
	for _, m := range got.mems {
		evictions += m.Evictions
	}
	for _, mv := range got.moves[:got.inStep] {
		if mv.To == Host {
			toHost++
		}
	}
	if evictions == 0 || evictions > toHost {
		t.Errorf("%d evictions counted for %d moves to the host", evictions, toHost)
	}
	var hostChunks int64
	for _, c := range got.chunks {
		if c.Optim == Host {
			// master, exp_avg, exp_avg_sq, twice: the early host Adam's
			// second set (early.go)
			hostChunks += 2 * 12 * int64(c.Elems)
		}
	}
	if base.host.Total() != 0 || got.host.InUse[kernels.CatOptState] != hostChunks || hostChunks == 0 {
		t.Fatalf("host optimizer bytes %d, want %d (>0); unbudgeted host total %d, want 0",
			got.host.InUse[kernels.CatOptState], hostChunks, base.host.Total())
	}
}

// Under a budget that fits every parameter chunk beside the activations,
// the resident set settles: after the warm-up and the first planned step
// no chunk part moves any more (only gradient shards go down and master
// weights up, through the mover, which are not chunk moves).
func TestResidentSetIsStable(t *testing.T) {
	spec := budgetBase(1, Auto)
	spec.steps = 5
	base := runGemini(t, spec)[0]
	spec.gem.DeviceBudget = base.peak / 2
	got := runGemini(t, spec)[0]
	if got.over > 0 || got.peak > spec.gem.DeviceBudget {
		t.Errorf("device peak %d B over the budget %d B", got.peak, spec.gem.DeviceBudget)
	}
	if d := stateDiff(base.state, got.state); d != "" {
		t.Errorf("differs from the unbudgeted run: %s", d)
	}
	if got.stats.EarlyAdam == 0 {
		t.Errorf("no host optimizer chunk was updated early (during backward)")
	}
	settled := got.steps[1]
	for s := 2; s < spec.steps; s++ {
		st := got.steps[s]
		if st.Moves != settled.Moves || st.Gathers != settled.Gathers {
			t.Errorf("step %d: %d chunk moves and %d gathers after step 2, want none", s+1, st.Moves-settled.Moves, st.Gathers-settled.Gathers)
		}
		if st.GradOffloads-got.steps[s-1].GradOffloads != st.HostAdam || st.HostAdam == 0 {
			t.Errorf("step %d: %d gradient offloads for %d host optimizer chunks, want one each (and some)",
				s+1, st.GradOffloads-got.steps[s-1].GradOffloads, st.HostAdam)
		}
	}
}

// An overflowing step under a budget, whose host gradient shards are
// checked in the background as their offloads complete, is skipped exactly
// as in the unbudgeted run.
func TestBudgetedOverflowIsSkipped(t *testing.T) {
	spec := budgetBase(1, Auto)
	spec.gem.Scaler.InitialScale = 1 << 24 // the fp16 gradients overflow until the scale backs off
	base := runGemini(t, spec)[0]
	for _, frac := range []int64{2, 4} {
		spec.gem.DeviceBudget = base.peak / frac
		got := runGemini(t, spec)[0]
		name := fmt.Sprintf("1/%d overflowing", frac)
		checkBudgetRun(t, name, spec.gem.DeviceBudget, got, base)
		if got.state.Scaler == nil || got.state.Scaler.Scale >= 1<<24 {
			t.Fatalf("%s: scaler %+v: want the scale backed off after an overflow", name, got.state.Scaler)
		}
		if got.stats.GradOffloads == 0 || got.stats.EarlyAdam == 0 {
			t.Fatalf("%s: %d gradient shards offloaded, %d early updates: the background check and the dropped early updates were not exercised",
				name, got.stats.GradOffloads, got.stats.EarlyAdam)
		}
		t.Logf("%s: scale %g after %d steps, losses %v", name, got.state.Scaler.Scale, spec.steps, got.losses)
	}
}

// TestSkippedStepDropsSparePayloads: with static placement offloading
// every parameter and optimizer part at 1/4, the parameters rest in host
// memory, so the early updates also round the new weights into spare host
// payloads (auto placement keeps some of them on the device at this size); a step that overflows (its loss scale raised to 2^24) must drop
// them and the steps after it must take their own, ending with the
// unbudgeted model bit for bit.
func TestSkippedStepDropsSparePayloads(t *testing.T) {
	spec := budgetBase(1, Static)
	spec.steps, spec.overflowAt = 5, 3
	base := runGemini(t, spec)[0]
	spec.gem.DeviceBudget = base.peak / 4
	spec.gem.OffloadParamFrac, spec.gem.OffloadOptimFrac = 1, 1
	got := runGemini(t, spec)[0]
	checkBudgetRun(t, "1/4 with a skipped step", spec.gem.DeviceBudget, got, base)
	before, skipped := got.steps[spec.overflowAt-1], got.steps[spec.overflowAt]
	if want := []bool{false, false, false, true, false}; !slices.Equal(got.skipped, want) {
		t.Fatalf("steps skipped %v, want %v (the one at scale 2^24)", got.skipped, want)
	}
	if skipped.EarlyAdam == before.EarlyAdam || skipped.EarlyWriteBacks != before.EarlyWriteBacks {
		t.Errorf("skipped step: %d early updates, %d early write-backs taken; want some updates and none taken",
			skipped.EarlyAdam-before.EarlyAdam, skipped.EarlyWriteBacks-before.EarlyWriteBacks)
	}
	if last := got.steps[spec.steps-1]; last.EarlyWriteBacks == skipped.EarlyWriteBacks {
		t.Errorf("no early write-back taken after the skipped step")
	}
	t.Logf("%d early updates, %d of them rounded the payloads too", got.stats.EarlyAdam, got.stats.EarlyWriteBacks)
}

// Under a budget too small to keep the parameters resident, a payload
// evicted after its upload leaves the device without a copy: the host
// still holds the values it was uploaded from. Only a payload written on
// the device since (by the optimizer step's write-back) travels down, so
// the payload bytes down are a fraction of those up, and the model is the
// unbudgeted one bit for bit. The write-backs into those host payloads are
// rounded by the early updates, during backward.
func TestCleanPayloadsAreDropped(t *testing.T) {
	spec := budgetBase(1, Auto)
	base := runGemini(t, spec)[0]
	spec.gem.DeviceBudget = base.peak / 4
	got := runGemini(t, spec)[0]
	checkBudgetRun(t, "1/4", spec.gem.DeviceBudget, got, base)
	var up, down int64
	for _, mv := range got.moves {
		if mv.Part != PartPayload {
			continue
		}
		if mv.To == Device {
			up += mv.Bytes
		} else {
			down += mv.Bytes
		}
	}
	t.Logf("payload bytes up %d, down %d; %d clean drops, %d moves", up, down, got.stats.CleanDrops, got.stats.Moves)
	if got.stats.CleanDrops == 0 || up == 0 || 2*down > up {
		t.Errorf("payload bytes up %d, down %d with %d clean drops: want drops, and at most half as many bytes down as up",
			up, down, got.stats.CleanDrops)
	}
	if got.stats.EarlyWriteBacks == 0 {
		t.Errorf("no write-back into host parameters was rounded by an early update")
	}
}

// TestEvaluationKeepsWhatFits checks budgeted evaluation once the step's
// statistics exist: the chunks stay on the device while they fit beside a
// training step's non-model peak, so at 1/2 of the unbudgeted peak an
// evaluation moves nothing, and at 1/5, where the parameters and the
// non-model peak do not fit together, every evaluation moves chunks and
// keeps the budget. The logits are the unbudgeted run's either way.
func TestEvaluationKeepsWhatFits(t *testing.T) {
	spec := budgetBase(1, Auto)
	spec.evals = 3
	base := runGemini(t, spec)
	for _, frac := range []int64{2, 5} {
		s := withBudget(spec, base[0].peak/frac, int(frac))
		got := runGemini(t, s)[0]
		name := fmt.Sprintf("1/%d", frac)
		checkBudgetRun(t, name, s.gem.DeviceBudget, got, base[0])
		if !got.evalSame {
			t.Errorf("%s: evaluations of the same batch gave different logits", name)
		}
		t.Logf("%s: chunk moves per evaluation %v", name, got.evalMoves)
		if frac == 2 && slices.ContainsFunc(got.evalMoves, func(n int) bool { return n != 0 }) {
			t.Errorf("%s: evaluations moved %v chunks: want none, everything fits", name, got.evalMoves)
		}
		if frac == 5 && got.evalMoves[2] == 0 {
			t.Errorf("%s: evaluations moved %v chunks: the parameters do not all fit at 1/5", name, got.evalMoves)
		}
	}
}
