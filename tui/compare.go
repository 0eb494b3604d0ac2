package tui

import (
	"fmt"

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
	{"resumed", func(r *run) string { return orDash(resumedCell(r)) }},
	{"final acc", finalAcc},
	{"best acc", bestAcc},
	{"epoch time", epochTime},
	{"images/s", imagesPerSec},
	{"peak device", func(r *run) string { return bytesOrDash(peakOf(r, true)) }},
	{"peak host", func(r *run) string { return bytesOrDash(peakOf(r, false)) }},
}

func finalAcc(r *run) string { return pctOrDash(finalAccOf(r)) }
func bestAcc(r *run) string  { return pctOrDash(bestAccOf(r)) }

func epochTime(r *run) string {
	if s, ok := epochSecsOf(r); ok {
		return fmt.Sprintf("%.1fs", s)
	}
	return "--"
}

func imagesPerSec(r *run) string {
	if v, ok := imagesPerSecOf(r); ok {
		return fmtRate(v)
	}
	return "--"
}

func pctOrDash(v float64, ok bool) string {
	if !ok {
		return "--"
	}
	return fmtPct(v)
}

// finalAccOf is the result's final accuracy, else the last epoch's.
func finalAccOf(r *run) (float64, bool) {
	if r.result != nil && r.result.FinalTestAcc > 0 {
		return r.result.FinalTestAcc, true
	}
	a := r.curves.last()
	return a, finite(a)
}

func bestAccOf(r *run) (float64, bool) {
	if r.result != nil && r.result.BestTestAcc > 0 {
		return r.result.BestTestAcc, true
	}
	b, at := r.curves.best()
	return b, at > 0
}

// epochSecsOf is the mean training time of the epochs this session saw
// end (after a resume: those trained since), else of the epochs the run
// recorded (a resumed run that had nothing left to train: the ones before
// its checkpoint).
func epochSecsOf(r *run) (float64, bool) {
	if s := r.prog.meanEpochSecs(); s > 0 {
		return s, true
	}
	es := r.history
	if r.result != nil && len(r.result.EpochResults) > 0 {
		es = r.result.EpochResults
	}
	var sum float64
	n := 0
	for _, e := range es {
		if e.Seconds > 0 {
			sum, n = sum+e.Seconds, n+1
		}
	}
	return sum / float64(max(n, 1)), n > 0
}

// resumeNote says, for a run resumed in this session, from where and what
// its time, speed and memory facts cover: "resumed from ep4: ep5-6
// measured", or that nothing was left to train.
func resumeNote(r *run) string {
	f, ok := resumeFactsOf(r)
	switch {
	case !ok:
		return ""
	case f.n <= 0 && f.finished:
		return fmt.Sprintf("resumed at %s: nothing left to train", r.from.Describe())
	case f.n <= 0:
		return fmt.Sprintf("resumed from %s", r.from.Describe())
	case f.n == 1:
		return fmt.Sprintf("resumed from %s: ep%d measured", r.from.Describe(), f.done+1)
	}
	return fmt.Sprintf("resumed from %s: ep%d-%d measured", r.from.Describe(), f.done+1, f.done+f.n)
}

// resumedCell is the fact table's short form of resumeNote.
func resumedCell(r *run) string {
	f, ok := resumeFactsOf(r)
	switch {
	case !ok:
		return ""
	case f.n <= 0 && f.finished:
		return fmt.Sprintf("@%d, none left", r.from.Epoch)
	case f.n <= 0:
		return fmt.Sprintf("@%d", r.from.Epoch)
	}
	return fmt.Sprintf("@%d, ep%d-%d", r.from.Epoch, f.done+1, f.done+f.n)
}

// resumeFacts is what the comparison says of a run resumed in this
// session: the epochs it finished since the checkpoint (n: its speed and
// memory are theirs), the epochs the checkpoint held (done) and whether
// the run has finished.
type resumeFacts struct {
	n, done  int
	finished bool
}

// resumeFactsOf is r's resumeFacts, and false for a run not resumed.
func resumeFactsOf(r *run) (resumeFacts, bool) {
	if r.from.IsZero() {
		return resumeFacts{}, false
	}
	done, _ := r.from.Done()
	return resumeFacts{n: r.prog.doneEpochs - done, done: done, finished: r.status.finished()}, true
}

func imagesPerSecOf(r *run) (float64, bool) {
	if r.result != nil && r.result.ImagesPerSecond > 0 {
		return r.result.ImagesPerSecond, true
	}
	return r.prog.rateEMA, r.prog.rateEMA > 0
}

// peakOf is the largest peak over ranks, from the result when there is
// one: the device peak is the backend's, the host peak all the host memory
// a rank holds (MemoryUsage.HostTotalPeak, the results' peak host bytes),
// as the memory pane shows them.
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
			p = max(p, u.HostTotalPeak(), u.HostTotal())
		}
	}
	w := r.cmp.worst()
	if device {
		return max(p, w.devPeak)
	}
	return max(p, w.hostPeak)
}

func bytesOrDash(b int64) string {
	if b <= 0 {
		return "--"
	}
	return fmtBytes(b)
}

// compareTable renders one column per run (a window around the selected
// run when they do not all fit) and one row per fact.
func compareTable(runs []*run, sel, w int, st styles) []string {
	const lw = 12
	cw := 10 // column width: marker or space, the widest id, a gap
	for _, r := range runs {
		cw = max(cw, ansi.StringWidth(r.info.ID)+2)
	}
	cw = min(cw, 26)
	fit := max((w-lw)/cw, 1)
	lo := min(max(sel-fit/2, 0), max(len(runs)-fit, 0))
	hi := min(lo+fit, len(runs))
	head := padRight("run", lw)
	for i := lo; i < hi; i++ {
		id := " " + runs[i].info.ID
		if i == sel {
			id = st.sel.Render("▸" + runs[i].info.ID)
		}
		head += cell(id, cw)
	}
	lines := []string{head}
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
	return lines
}

// cell is one column of the comparison: s cut to leave a one-cell gap,
// so that a long id never runs into the next column's marker.
func cell(s string, cw int) string { return fitLine(s, cw-1) + " " }
