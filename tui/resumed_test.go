package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/report"
	"resnetlab/runner"
)

func history(n int) []report.EpochResult {
	out := make([]report.EpochResult, n)
	for i := range out {
		out[i] = report.EpochResult{Epoch: i + 1, Loss: 2 - 0.2*float64(i), TestAcc: 0.3 + 0.1*float64(i), Seconds: 3}
	}
	out[2].TestAcc = 0.9 // the best epoch lies before the checkpoint
	return out
}

// A run resumed from a checkpoint in a new session shows its stats in the
// comparison: accuracy and loss of the epochs before the checkpoint (from
// RunStarted's history) and the best of all epochs, time, speed and
// memory from the epochs it trained since, and the legend and the fact
// table say from where it resumed and which epochs were measured. A run
// resumed at its last epoch, with nothing to train, shows the history's
// accuracies and epoch time and the memory it held, and says that nothing
// was left to train.
func TestResumedRunShowsItsStats(t *testing.T) {
	const mib = 1 << 20
	info := testGrid()[0]
	info.Epochs, info.StepsPerEpoch = 6, 20
	mem := runner.MemoryUsage{Run: info.ID, Device: [6]int64{10 * mib, 0, 20 * mib}, DevicePeak: 40 * mib, HostPeak: 1 * mib}
	value := func(r *run, label string) string { return peakRow(r, label) }
	legend := func(m Model) string {
		return ansi.Strip(strings.Join(compareLegend(m.runs, 0, m.cmp, cursorEpoch(m.runs, m.cmp), 200, 4, m.st), "\n"))
	}

	// Resumed from epoch 4: trains 5 and 6 here.
	m := New(Options{Runs: []runner.RunInfo{info}})
	m.st = newStyles(true)
	m = step(m, eventMsg{runner.RunStarted{Info: info, StartEpoch: 4, History: history(4)}})
	m = step(m, eventMsg{mem})
	for ep := 5; ep <= 6; ep++ {
		for s := 1; s <= 20; s++ {
			m = step(m, eventMsg{runner.StepDone{Run: info.ID, Epoch: ep, Step: s, Steps: 20, Loss: 0.5, StepTime: 1e7, ImagesPerSec: 800}})
		}
		m = step(m, eventMsg{runner.EpochDone{Run: info.ID, Epoch: ep, Loss: 0.5, TestAcc: 0.8, Seconds: 2}})
	}
	r := m.runs[0]
	for label, want := range map[string]string{"final acc": "80.00%", "best acc": "90.00%", "epoch time": "2.0s",
		"images/s": fmtRate(800), "peak device": "40.0M", "resumed": "@4, ep5-6"} {
		if got := value(r, label); got != want {
			t.Errorf("resumed from 4, training: %s %q, want %q", label, got, want)
		}
	}
	m.cmp.epoch = 3
	if l := legend(m); !strings.Contains(l, "@ep3 acc 90.00%  loss 1.6000") || !strings.Contains(l, "resumed from epoch 4: ep5-6 measured") {
		t.Errorf("legend at epoch 3 (before the checkpoint): %q", l)
	}

	// Resumed at the last epoch: nothing trains.
	m = New(Options{Runs: []runner.RunInfo{info}})
	m.st = newStyles(true)
	m = step(m, eventMsg{runner.RunStarted{Info: info, StartEpoch: 6, History: history(6)}})
	m = step(m, eventMsg{mem})
	m = step(m, eventMsg{runner.RunFinished{Run: info.ID, Result: &report.Result{Status: report.StatusDone,
		EpochResults: history(6), FinalTestAcc: 0.8, BestTestAcc: 0.9, PeakDeviceBytes: []int64{40 * mib}, PeakHostBytes: []int64{1 * mib}}}})
	r = m.runs[0]
	for label, want := range map[string]string{"final acc": "80.00%", "best acc": "90.00%", "epoch time": "3.0s",
		"images/s": "--", "peak device": "40.0M", "peak host": "1.00M", "resumed": "@6, none left"} {
		if got := value(r, label); got != want {
			t.Errorf("resumed at 6: %s %q, want %q", label, got, want)
		}
	}
	if l := legend(m); !strings.Contains(l, "6/6  @ep6 acc 80.00%  loss 1.0000") || !strings.Contains(l, "resumed at epoch 6: nothing left to train") {
		t.Errorf("legend: %q", l)
	}
}
