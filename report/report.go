package report

import (
	"fmt"
	"math"
	"resnetlab/spec"
	"sort"
	"strings"
)

// Row sources of a report.
const (
	SourceRun       = "resnetlab"
	SourcePeer      = "peer"
	SourceReference = "reference"
)

// Row is one line of `resnetlab report`: a resnetlab run, a PyTorch
// peer log or a published reference number. Zero numbers mean "unknown".
type Row struct {
	Label, Source              string
	Plugin, Precision, Dataset string
	WorldSize                  int
	EpochsDone, EpochsPlanned  int
	Curve                      []EpochResult // evaluated epochs only, in order
	HasFinal                   bool
	FinalAcc                   float64
	BestAcc                    float64
	BestEpoch                  int
	WallSeconds                float64
	MeanEpochSeconds           float64
	ImagesPerSec               float64
	PeakDeviceBytes            int64   // largest per-rank peak
	PeakDevicePerRank          []int64 // each rank's peak device memory
	PeakHostBytes              int64   // largest per-rank peak host memory
	Status, Error              string
}

// Build turns results, peer logs and (when reference is set) the published
// reference numbers into report rows: runs sorted by spec, plugin,
// precision and ranks, then peers, then the reference rows.
func Build(results []*Result, peers []*PeerLog, reference bool) []Row {
	rs := append([]*Result(nil), results...)
	sort.SliceStable(rs, func(i, j int) bool { return resultLess(rs[i], rs[j]) })
	multiSpec := len(rs) > 0 && hasSeveralSpecs(rs)
	var rows []Row
	for _, r := range rs {
		rows = append(rows, ResultRow(r, multiSpec))
	}
	for _, p := range peers {
		rows = append(rows, p.Row())
	}
	if reference {
		rows = append(rows, ReferenceRows()...)
	}
	return rows
}

func resultLess(a, b *Result) bool {
	if a.Spec != b.Spec {
		return a.Spec < b.Spec
	}
	if a.Plugin != b.Plugin {
		return a.Plugin < b.Plugin
	}
	if a.Precision != b.Precision {
		return a.Precision < b.Precision
	}
	return a.WorldSize < b.WorldSize
}

// ResultRow is the report row of one resnetlab run; withSpec prefixes the
// label with the spec name (several specs in one report).
func ResultRow(r *Result, withSpec bool) Row {
	row := Row{
		Label: runLabel(r, withSpec), Source: SourceRun, Plugin: r.Plugin, Precision: r.Precision,
		Dataset: r.Dataset, WorldSize: r.WorldSize, EpochsDone: len(r.EpochResults), EpochsPlanned: r.Epochs,
		Curve: evaluatedEpochs(r.EpochResults), WallSeconds: r.TrainSeconds, ImagesPerSec: r.ImagesPerSecond,
		Status: string(r.Status), Error: r.Error,
	}
	for _, p := range r.PeakDeviceBytes {
		row.PeakDeviceBytes = max(row.PeakDeviceBytes, p)
	}
	row.PeakDevicePerRank = r.PeakDeviceBytes
	for _, p := range r.PeakHostBytes {
		row.PeakHostBytes = max(row.PeakHostBytes, p)
	}
	row.MeanEpochSeconds = meanEpochSeconds(r.EpochResults)
	row.setAccuracy(r.FinalTestAcc, r.BestTestAcc)
	return row
}

// setAccuracy fills the final and best accuracy from the curve, falling
// back to the given numbers (best without its epoch) when no epoch was
// evaluated.
func (row *Row) setAccuracy(final, best float64) {
	if len(row.Curve) == 0 {
		row.HasFinal = final > 0
		row.FinalAcc, row.BestAcc = final, best
		return
	}
	row.HasFinal, row.FinalAcc = true, final
	if !(final > 0) { // null (NaN) in the file: the last evaluated epoch
		row.FinalAcc = row.Curve[len(row.Curve)-1].TestAcc
	}
	for _, e := range row.Curve {
		if e.TestAcc > row.BestAcc { // strict: the first epoch reaching the best
			row.BestAcc, row.BestEpoch = e.TestAcc, e.Epoch
		}
	}
}

// evaluatedEpochs drops epochs without a test accuracy: with eval_every an
// epoch that was not evaluated holds NaN in memory and null in the result
// file, which encoding/json reads back as 0 (no real 10-class model scores
// exactly 0).
func evaluatedEpochs(es []EpochResult) []EpochResult {
	var out []EpochResult
	for _, e := range es {
		if e.TestAcc > 0 && !math.IsNaN(e.TestAcc) {
			out = append(out, e)
		}
	}
	return out
}

func meanEpochSeconds(es []EpochResult) float64 {
	if len(es) == 0 {
		return 0
	}
	var sum float64
	for _, e := range es {
		sum += e.Seconds
	}
	return sum / float64(len(es))
}

// Baseline is the index of the row the accuracy deltas are measured
// against: a resnetlab fp32 single-rank run, preferring torch_ddp and
// finished runs; -1 when there is none.
func Baseline(rows []Row) int {
	best, bestScore := -1, -1
	for i, r := range rows {
		if r.Source != SourceRun || r.Precision != "fp32" || r.WorldSize != 1 || !r.HasFinal {
			continue
		}
		score := 0
		if r.Plugin == spec.PluginTorchDDP {
			score += 2
		}
		if r.Status == string(StatusDone) {
			score++
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// reportDelta is row's final accuracy minus the baseline's, in percentage points;
// ok is false when either is unknown or they ran on different data sets.
func reportDelta(row, base Row) (pts float64, ok bool) {
	if !row.HasFinal || !base.HasFinal || row.Dataset == "" || row.Dataset != base.Dataset {
		return 0, false
	}
	return 100 * (row.FinalAcc - base.FinalAcc), true
}

// Markdown renders rows as a Markdown table followed by notes (the
// baseline of the delta column, sources, errors of failed runs).
func Markdown(rows []Row) string {
	base := Baseline(rows)
	header := []string{"Run", "Source", "Plugin", "Precision", "Ranks", "Data", "Epochs", "Final acc",
		"Best acc (epoch)"}
	if base >= 0 {
		header = append(header, "Δ vs "+rows[base].Label+" (pts)")
	}
	header = append(header, "Wall time", "Mean epoch", "Images/s", "Peak dev mem/rank", "Status")
	var b strings.Builder
	writeMarkdownRow(&b, header)
	writeMarkdownRow(&b, markdownRule(len(header)))
	for i, r := range rows {
		writeMarkdownRow(&b, markdownCells(r, i, base, rows))
	}
	writeReportNotes(&b, rows, base)
	return b.String()
}

func markdownCells(r Row, i, base int, rows []Row) []string {
	cells := []string{r.Label, r.Source, orDash(r.Plugin), orDash(r.Precision), intOrDash(r.WorldSize),
		orDash(r.Dataset), epochsCell(r), "-", "-"}
	if r.HasFinal {
		cells[7] = pct(r.FinalAcc)
	}
	if r.BestAcc > 0 {
		cells[8] = pct(r.BestAcc)
		if r.BestEpoch > 0 {
			cells[8] += fmt.Sprintf(" (%d)", r.BestEpoch)
		}
	}
	if base >= 0 {
		cells = append(cells, deltaCell(r, i, base, rows))
	}
	ips := "-"
	if r.ImagesPerSec > 0 {
		ips = fmt.Sprintf("%.0f", r.ImagesPerSec)
	}
	mem := "-"
	if r.PeakDeviceBytes > 0 {
		mem = spec.FormatSize(r.PeakDeviceBytes)
	}
	return append(cells, formatWall(r.WallSeconds), secondsOrDash(r.MeanEpochSeconds), ips, mem,
		orDash(r.Status))
}

func deltaCell(r Row, i, base int, rows []Row) string {
	if i == base {
		return "baseline"
	}
	d, ok := reportDelta(r, rows[base])
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%+.2f", d)
}

func epochsCell(r Row) string {
	switch {
	case r.EpochsPlanned > 0:
		return fmt.Sprintf("%d/%d", r.EpochsDone, r.EpochsPlanned)
	case r.EpochsDone > 0:
		return fmt.Sprint(r.EpochsDone)
	}
	return "-"
}

// formatWall writes seconds as 12.3s, 4m05s or 1h02m.
func formatWall(s float64) string {
	switch {
	case s <= 0:
		return "-"
	case s < 60:
		return fmt.Sprintf("%.1fs", s)
	case s < 3600:
		m := int(s) / 60
		return fmt.Sprintf("%dm%02ds", m, int(s)-60*m)
	}
	h := int(s) / 3600
	return fmt.Sprintf("%dh%02dm", h, (int(s)-3600*h)/60)
}

func secondsOrDash(s float64) string {
	if s <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fs", s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func intOrDash(n int) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func markdownRule(n int) []string {
	rule := make([]string, n)
	for i := range rule {
		rule[i] = "---"
	}
	return rule
}

// writeMarkdownRow writes one table row, escaping pipes so a cell cannot
// split the table.
func writeMarkdownRow(b *strings.Builder, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
	}
	b.WriteString("\n")
}

func writeReportNotes(b *strings.Builder, rows []Row, base int) {
	b.WriteString("\nWall time: resnetlab train_seconds (sum of epoch times); peer: its total_s " +
		"(or the sum of its epoch times). Peak dev mem/rank: the largest per-rank peak.\n")
	if base >= 0 {
		fmt.Fprintf(b, "Δ: final accuracy minus that of %s (fp32, one rank), in percentage points, "+
			"for rows on the same data set (%s).\n", rows[base].Label, rows[base].Dataset)
	}
	for _, r := range rows {
		if r.Source == SourceReference {
			b.WriteString("Reference rows: " + referenceSource + ".\n")
			break
		}
	}
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(b, "\n%s: %s\n", r.Label, r.Error)
		}
	}
}
