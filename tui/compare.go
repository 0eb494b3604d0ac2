package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// compareRow is one line of the comparison: a label and a value per run.
type compareRow struct {
	label string
	value func(r *run) string
}

var compareRows = []compareRow{
	{"plugin", func(r *run) string { return orDash(r.info.Plugin) }},
	{"precision", func(r *run) string { return orDash(r.info.Precision) }},
	{"gpus", func(r *run) string { return fmt.Sprint(r.info.WorldSize) }},
	{"status", func(r *run) string { return r.status.String() }},
	{"epoch", func(r *run) string { return fmt.Sprintf("%d/%d", r.prog.doneEpochs, r.info.Epochs) }},
	{"final acc", finalAcc},
	{"best acc", bestAcc},
	{"epoch time", epochTime},
	{"images/s", imagesPerSec},
	{"peak device", func(r *run) string { return bytesOrDash(peakOf(r, true)) }},
	{"peak host", func(r *run) string { return bytesOrDash(peakOf(r, false)) }},
}

func finalAcc(r *run) string {
	if r.result != nil && r.result.FinalTestAcc > 0 {
		return fmtPct(r.result.FinalTestAcc)
	}
	if a := r.curves.last(); finite(a) {
		return fmtPct(a)
	}
	return "--"
}

func bestAcc(r *run) string {
	if r.result != nil && r.result.BestTestAcc > 0 {
		return fmtPct(r.result.BestTestAcc)
	}
	if b, at := r.curves.best(); at > 0 {
		return fmtPct(b)
	}
	return "--"
}

func epochTime(r *run) string {
	if s := r.prog.meanEpochSecs(); s > 0 {
		return fmt.Sprintf("%.1fs", s)
	}
	if res := r.result; res != nil && len(res.EpochResults) > 0 {
		return fmt.Sprintf("%.1fs", res.TrainSeconds/float64(len(res.EpochResults)))
	}
	return "--"
}

func imagesPerSec(r *run) string {
	if r.result != nil && r.result.ImagesPerSecond > 0 {
		return fmtRate(r.result.ImagesPerSecond)
	}
	if r.prog.rateEMA > 0 {
		return fmtRate(r.prog.rateEMA)
	}
	return "--"
}

// peakOf is the largest peak over ranks, from the result when there is one.
func peakOf(r *run, device bool) int64 {
	var p int64
	if r.result != nil {
		src := r.result.PeakHostBytes
		if device {
			src = r.result.PeakDeviceBytes
		}
		for _, b := range src {
			p = max(p, b)
		}
	}
	for _, u := range r.mem.ranks {
		if device {
			p = max(p, u.DevicePeak, total(u.Device))
		} else {
			p = max(p, u.HostPeak, total(u.Host))
		}
	}
	return p
}

func bytesOrDash(b int64) string {
	if b <= 0 {
		return "--"
	}
	return fmtBytes(b)
}

// compareView renders one column per run (a window around the selected run
// when they do not all fit) and one row per fact.
func compareView(runs []*run, sel, w, h int, st styles) []string {
	const lw = 12
	cw := 10 // column width: marker or space, the widest id, a gap
	for _, r := range runs {
		cw = max(cw, ansi.StringWidth(r.info.ID)+2)
	}
	cw = min(cw, 26)
	fit := max((w-lw)/cw, 1)
	lo := min(max(sel-fit/2, 0), max(len(runs)-fit, 0))
	hi := min(lo+fit, len(runs))
	lines := []string{rule(fmt.Sprintf("compare · %d runs", len(runs)), w, st)}
	head := padRight("run", lw)
	for i := lo; i < hi; i++ {
		id := " " + runs[i].info.ID
		if i == sel {
			id = st.sel.Render("▸" + runs[i].info.ID)
		}
		head += cell(id, cw)
	}
	lines = append(lines, head)
	for _, row := range compareRows {
		s := st.dim.Render(padRight(row.label, lw))
		for _, r := range runs[lo:hi] {
			v := row.value(r)
			if row.label == "status" { // coloured as in the header: DONE, FAILED, INTERRUPTED, …
				v = statusBadge(r.status, st)
			}
			s += cell(" "+v, cw)
		}
		lines = append(lines, s)
	}
	if hi-lo < len(runs) {
		lines = append(lines, st.dim.Render(fmt.Sprintf("runs %d-%d of %d · tab/shift+tab to scroll", lo+1, hi, len(runs))))
	}
	lines = append(lines, "", summary(runs, st))
	return fitBlock(lines, w, h)
}

// cell is one column of the comparison: s cut to leave a one-cell gap,
// so that a long id never runs into the next column's marker.
func cell(s string, cw int) string { return fitLine(s, cw-1) + " " }

// summary counts the runs per status: "2 done · 1 running · 3 queued".
func summary(runs []*run, st styles) string {
	var n [len(statusNames)]int
	for _, r := range runs {
		n[r.status]++
	}
	var parts []string
	for s, k := range n {
		if k > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", k, strings.ToLower(strings.TrimSuffix(status(s).String(), "…"))))
		}
	}
	return st.dim.Render(strings.Join(parts, " · "))
}
