package runner

import (
	"fmt"
	"path/filepath"
	"resnetlab/spec"
	"strings"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/report"
)

// A Gemini run under half its unbudgeted device peak keeps the budget,
// holds chunk parts in host memory, and says so in its events and result;
// a torch_ddp run on the CPU backend reports the host memory its backend
// holds.
func TestGeminiMemoryIsReported(t *testing.T) {
	gem := "[[run]]\nplugin = \"gemini\"\nprecision = \"fp16\"\n"
	chunks := "[gemini]\nplacement = \"auto\"\nchunk_size = \"72KiB\"\n" // several chunks, so some can leave
	free := finished(t, mustCollect(t, smallBatchSpec(t, gem+chunks)))
	if len(free) != 1 {
		t.Fatalf("%d results", len(free))
	}
	budget := free[0].PeakDeviceBytes[0] / 2
	evs := mustCollect(t, smallBatchSpec(t, gem+chunks+fmt.Sprintf("device_budget = \"%dKiB\"\n", budget>>10)))
	budget = budget >> 10 << 10
	res := finished(t, evs)[0]
	if res.PeakDeviceBytes[0] > budget || res.PeakHostBytes[0] <= res.PeakDeviceBytes[0] {
		t.Errorf("peak device %d B (budget %d B), peak host %d B: want device within the budget and the host tier on top",
			res.PeakDeviceBytes[0], budget, res.PeakHostBytes[0])
	}
	if len(res.Gemini) != 1 || res.Gemini[0].H2DBytes == 0 || res.Gemini[0].D2HBytes == 0 ||
		res.Gemini[0].PeakHostTierBytes == 0 || len(res.Gemini[0].NonModelPerOp) == 0 || len(res.Gemini[0].Chunks) == 0 {
		t.Fatalf("gemini statistics %+v", res.Gemini)
	}
	var mem []MemoryUsage
	var steps int
	var mid, onHost bool
	for _, e := range evs {
		switch e := e.(type) {
		case MemoryUsage:
			mem = append(mem, e)
		case GeminiStep:
			steps++
		case ChunksUpdate:
			mid = mid || e.Op != ""
			for _, c := range e.Chunks {
				onHost = onHost || c.Params == "host" || c.Optim == "host"
			}
		}
	}
	if len(mem) == 0 || mem[len(mem)-1].Budget != budget || mem[len(mem)-1].HostPeak == 0 || mem[len(mem)-1].HostPageable == 0 {
		t.Errorf("memory events %+v", mem)
	}
	if want := res.Epochs * 4; steps != want || !mid || !onHost { // 8 images / batch 2
		t.Errorf("%d step statistics (want %d), mid-step snapshot %v, a chunk part on the host %v", steps, want, mid, onHost)
	}

	ddp := finished(t, mustCollect(t, tinySpec(t, "[[run]]\nplugin = \"torch_ddp\"\nprecision = \"fp32\"\n")))[0]
	if ddp.PeakHostBytes[0] <= ddp.PeakDeviceBytes[0] || ddp.Gemini != nil {
		t.Errorf("torch_ddp on the CPU: peak host %d B, device %d B (the device is host memory, plus the batch buffers)",
			ddp.PeakHostBytes[0], ddp.PeakDeviceBytes[0])
	}
}

// smallBatchSpec is a run whose chunks, not its activations, fill most of
// the device: width 8, batch 2 (the proportions of gemini's budget tests).
func smallBatchSpec(t *testing.T, extra string) *spec.Spec {
	t.Helper()
	return smallBatchSpecTest(t, extra, 10)
}

// smallBatchSpecTest is smallBatchSpec with test test images.
func smallBatchSpecTest(t *testing.T, extra string, test int) *spec.Spec {
	t.Helper()
	dir := t.TempDir()
	src := fmt.Sprintf(`
name = "small"
dataset = "synthetic"
width = 8
epochs = 1
batch_size = 2
lr = 2e-3
device = "cpu"
checkpoint = %q
results_dir = %q
%s
[synthetic]
train = 8
test = %d
seed = 3
`, filepath.Join(dir, "ckpt-{plugin}"), filepath.Join(dir, "results"), extra, test)
	s, err := spec.Parse(filepath.Join(dir, "small.toml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCollect(t *testing.T, s *spec.Spec) []Event {
	t.Helper()
	evs, err := collect(t, s, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Two ranks under half their unbudgeted peak, with a test set larger than
// a training batch: every rank's device peak, collectives' scratch and the
// evaluation included, stays within the budget.
func TestGeminiTwoRanksKeepTheBudget(t *testing.T) {
	gem := "[[run]]\nplugin = \"gemini\"\nprecision = \"fp16\"\ngpus = 2\n"
	chunks := "[gemini]\nplacement = \"auto\"\nchunk_size = \"72KiB\"\n"
	free := finished(t, mustCollect(t, smallBatchSpecTest(t, gem+chunks, 128)))[0]
	budget := free.PeakDeviceBytes[0] / 2 >> 10 << 10
	res := finished(t, mustCollect(t, smallBatchSpecTest(t, gem+chunks+fmt.Sprintf("device_budget = \"%dKiB\"\n", budget>>10), 128)))[0]
	for r, p := range res.PeakDeviceBytes {
		if p > budget {
			t.Errorf("rank %d: peak device %d B over the budget %d B (gemini's own step peak %d B)", r, p, budget, res.Gemini[r].PeakDeviceBytes)
		}
	}
}

// A device_budget below what the warm-up step needs fails at that step
// with one line that names the spec's key, the given value, the rank and
// the smallest budget that works, which is exact: one byte less fails the
// same way, that budget and the rounded example both train.
func TestTooSmallBudgetNamesTheMinimum(t *testing.T) {
	budgetRun := func(budget string) error {
		_, err := collect(t, tinySpec(t, "[[run]]\nplugin = \"gemini\"\n[gemini]\ndevice_budget = \""+budget+"\""), RunOptions{}, nil)
		return err
	}
	err := budgetRun("100KiB")
	if err == nil {
		t.Fatal("a 100 KiB budget trained")
	}
	msg := err.Error()
	for _, want := range []string{"rank 0: ", `tiny.toml: [gemini] device_budget = "100.00 KiB" (102400 B) is too small`, "want device_budget >= "} {
		if !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Fatalf("error %q: want one line with %q", msg, want)
		}
	}
	var min int64
	var example string
	if _, err := fmt.Sscanf(msg[strings.Index(msg, "want device_budget >= "):], "want device_budget >= %d B, e.g. device_budget = %q", &min, &example); err != nil {
		t.Fatalf("no minimum in %q: %v", msg, err)
	}
	if err := budgetRun(fmt.Sprintf("%dB", min-1)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("want device_budget >= %d B", min)) {
		t.Errorf("budget %d B (one below the minimum): %v", min-1, err)
	}
	for _, ok := range []string{fmt.Sprintf("%dB", min), example} {
		if err := budgetRun(ok); err != nil {
			t.Errorf("budget %s (the minimum %d B said it works): %v", ok, min, err)
		}
	}
}

// The memory events say what the result records: every event's device
// and host peaks are the run's so far (never lower than an earlier
// event's, though Gemini restarts the backend's peak every step), the last
// one's are the result's peak_device_bytes_per_rank and
// peak_host_bytes_per_rank, and on the CPU backend the host total holds
// the backend too, so the memory pane, the comparison and the results
// file show one number for each.
func TestMemoryEventsAgreeWithTheResult(t *testing.T) {
	gem := "[[run]]\nplugin = \"gemini\"\nprecision = \"fp16\"\n[gemini]\nplacement = \"auto\"\nchunk_size = \"72KiB\"\n"
	free := mustCollect(t, smallBatchSpec(t, gem))
	budget := fmt.Sprintf("device_budget = \"%dKiB\"\n", finished(t, free)[0].PeakDeviceBytes[0]/2>>10)
	for name, evs := range map[string][]Event{
		"torch_ddp":     mustCollect(t, tinySpec(t, "[[run]]\nplugin = \"torch_ddp\"\nprecision = \"fp32\"\n")),
		"gemini":        free,
		"gemini budget": mustCollect(t, smallBatchSpec(t, gem+budget)),
	} {
		res := finished(t, evs)[0]
		var last MemoryUsage
		for i, u := range only[MemoryUsage](evs) {
			if !u.DeviceIsHost {
				t.Fatalf("%s: a CPU run's memory event has DeviceIsHost false", name)
			}
			if i > 0 && (u.DevicePeak < last.DevicePeak || u.HostPeak < last.HostPeak) {
				t.Errorf("%s: event %d: peaks device %d host %d after %d and %d: a peak went down", name, i,
					u.DevicePeak, u.HostPeak, last.DevicePeak, last.HostPeak)
			}
			if dev := total6(u.Device); u.HostTotal() != u.HostPageable+u.HostPinned+dev || u.DevicePeak < dev {
				t.Errorf("%s: event %d: host total %d, want pageable %d + pinned %d + the backend's %d (peak %d)", name, i,
					u.HostTotal(), u.HostPageable, u.HostPinned, dev, u.DevicePeak)
			}
			last = u
		}
		if last.DevicePeak != res.PeakDeviceBytes[0] || last.HostTotalPeak() != res.PeakHostBytes[0] {
			t.Errorf("%s: last event peaks device %d host %d, result %d and %d", name, last.DevicePeak, last.HostTotalPeak(),
				res.PeakDeviceBytes[0], res.PeakHostBytes[0])
		}
		if res.Gemini != nil && last.DevicePeak < res.Gemini[0].PeakDeviceBytes {
			t.Errorf("%s: device peak %d below Gemini's step peak %d", name, last.DevicePeak, res.Gemini[0].PeakDeviceBytes)
		}
	}
}

func total6(c [6]int64) int64 {
	var t int64
	for _, b := range c {
		t += b
	}
	return t
}

// A backend whose peak was restarted (Gemini does it every step) still
// gives the run's peak: the memory events and the result keep the
// highest bytes published so far, and Gemini's step peaks.
func TestPublishedPeaksAreTheRuns(t *testing.T) {
	be := cpu.New()
	events := make(chan Event, 8)
	j := &job{spec: &spec.Spec{}, cell: spec.Cell{WorldSize: 1}, info: RunInfo{ID: "a"}, events: events,
		ranks: []*rankState{{be: be, yh: make([]float32, 50)}}, gem: make([]geminiRank, 1),
		result: &report.Result{PeakDeviceBytes: make([]int64, 1), PeakHostBytes: make([]int64, 1)}}
	big := be.New(kernels.CatActivations, kernels.F32, 1<<20) // 4 MiB
	j.publishMemory()
	be.Free(big)
	be.ResetPeak()
	j.gem[0].total.PeakDeviceBytes = 5 << 20 // a step between the reports peaked higher
	j.publishMemory()
	evs := drain(events)
	if len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	first, last := evs[0].(MemoryUsage), evs[1].(MemoryUsage)
	if first.DevicePeak < 4<<20 || last.DevicePeak != 5<<20 || last.HostPeak != 200 {
		t.Errorf("device peaks %d then %d (want >= 4 MiB, then Gemini's 5 MiB), host peak %d (want the 200-byte label buffer)",
			first.DevicePeak, last.DevicePeak, last.HostPeak)
	}
	if j.result.PeakDeviceBytes[0] != last.DevicePeak || j.result.PeakHostBytes[0] != last.HostTotalPeak() ||
		last.HostTotalPeak() != 5<<20+200 {
		t.Errorf("result peaks device %d host %d, last event %d and %d (host total = device peak + 200 B on the CPU)",
			j.result.PeakDeviceBytes[0], j.result.PeakHostBytes[0], last.DevicePeak, last.HostTotalPeak())
	}
}
