package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/report"
	"resnetlab/runner"
)

// peakHostCell is the comparison table's "peak host" of r.
func peakRow(r *run, label string) string {
	for _, row := range compareRows {
		if row.label == label {
			return row.value(r)
		}
	}
	return ""
}

// The memory pane and the comparison show the same device and host
// numbers for a run, live and once its result has come: on the CPU
// backend the host line holds the backend too (the results' peak host
// bytes), and says so; on a GPU it is the pinned and pageable memory
// outside the backend, with the pinned part named. Both bars of a rank
// share one scale.
func TestMemoryPaneAndComparisonAgree(t *testing.T) {
	const mib = 1 << 20
	st := newStyles(true)
	for _, c := range []struct {
		name     string
		u        runner.MemoryUsage
		hostWant string // in the pane's host line
	}{
		{"cpu", runner.MemoryUsage{Run: "a", Device: [6]int64{1 * mib, 0, 9 * mib, 9 * mib, 4, 10 * mib},
			DevicePeak: 39 * mib, HostPageable: 200, HostPeak: 200, DeviceIsHost: true}, "= cpu + 200B"},
		{"cuda", runner.MemoryUsage{Run: "a", Device: [6]int64{24 * mib, 0, 1 * mib, 44 * mib, 1, 2 * mib},
			Host: [6]int64{0, 47 * mib, 285 * mib}, DevicePeak: 89 * mib, HostPageable: 1 * mib, HostPinned: 410 * mib,
			HostPeak: 436 * mib, Budget: 132 * mib}, "pin 410M"},
	} {
		r := newRun(runner.RunInfo{ID: "a", Plugin: "gemini", WorldSize: 1})
		r.Update(runner.RunStarted{Info: r.info})
		r.Update(c.u)
		check := func(when string) {
			lines := r.mem.rankLines(0, 2, 120, st)
			dev, host := ansi.Strip(lines[0]), ansi.Strip(lines[1])
			wantDev, wantHost := fmtBytes(c.u.DevicePeak), fmtBytes(c.u.HostTotalPeak())
			if !strings.HasSuffix(dev, "pk "+wantDev) || !strings.HasSuffix(host, "pk "+wantHost) ||
				!strings.Contains(host, fmtBytes(c.u.HostTotal())+" ") || !strings.Contains(host, c.hostWant) {
				t.Errorf("%s %s: pane\n%s\n%s\nwant device pk %s, host %s pk %s with %q", c.name, when, dev, host,
					wantDev, fmtBytes(c.u.HostTotal()), wantHost, c.hostWant)
			}
			if got := peakRow(r, "peak host"); got != wantHost {
				t.Errorf("%s %s: comparison's peak host %s, the pane's %s", c.name, when, got, wantHost)
			}
			if got := peakRow(r, "peak device"); got != wantDev {
				t.Errorf("%s %s: comparison's peak device %s, the pane's %s", c.name, when, got, wantDev)
			}
			devCells := strings.Count(dev, "·") + strings.Count(dev, "┊") + strings.Count(dev, "│")
			hostCells := strings.Count(host, "·") + strings.Count(host, "┊") + strings.Count(host, "│")
			if c.u.DeviceIsHost && hostCells > devCells {
				t.Errorf("%s: the host bar (holding the backend) is shorter than the cpu bar:\n%s\n%s", c.name, dev, host)
			}
		}
		check("live")
		if rows := ansi.Strip(strings.Join(r.mem.table(2, 5, st), "\n")); c.u.DeviceIsHost != strings.Contains(rows, "r0 cpu ") {
			t.Errorf("%s: the table's backend row should be labelled as its bar (cpu on the CPU backend):\n%s", c.name, rows)
		}
		r.Update(runner.RunFinished{Run: "a", Result: &report.Result{Status: report.StatusDone,
			PeakDeviceBytes: []int64{c.u.DevicePeak}, PeakHostBytes: []int64{c.u.HostTotalPeak()}}})
		check("finished")
	}
}
