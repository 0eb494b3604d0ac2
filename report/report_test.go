package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func reportResults() []*Result {
	return []*Result{
		{Run: "torch_ddp-fp32-2", Plugin: "torch_ddp", Precision: "fp32", WorldSize: 2, Dataset: "cifar10",
			Epochs: 3, EpochResults: []EpochResult{{1, 2, 0.35, 5}, {2, 1.5, 0.57, 5}, {3, 1.2, 0.58, 5}},
			FinalTestAcc: 0.58, BestTestAcc: 0.58, TrainSeconds: 15, Status: "done"},
		{Run: "torch_ddp-fp32-1", Plugin: "torch_ddp", Precision: "fp32", WorldSize: 1, Dataset: "cifar10",
			Epochs: 3, EpochResults: []EpochResult{{1, 2, 0.40, 10}, {2, 1.5, 0.62, 11}, {3, 1.3, 0.60, 12}},
			FinalTestAcc: 0.60, BestTestAcc: 0.62, TrainSeconds: 33, ImagesPerSecond: 4545,
			PeakDeviceBytes: []int64{1 << 30}, Status: "done"},
		// eval_every 3: epoch 2 was not evaluated (NaN in memory).
		{Run: "gemini-fp16-2", Plugin: "gemini", Precision: "fp16", WorldSize: 2, Dataset: "cifar10",
			Epochs: 3, EpochResults: []EpochResult{{1, 2, 0.30, 9}, {2, 1.6, math.NaN(), 9}, {3, 1.2, 0.65, 9}},
			FinalTestAcc: 0.65, BestTestAcc: 0.65, TrainSeconds: 27, PeakDeviceBytes: []int64{1 << 29, 3 << 29},
			Status: "done"},
		{Run: "low_level_zero-fp16-1", Plugin: "low_level_zero", Precision: "fp16", WorldSize: 1,
			Dataset: "fashion-mnist", Epochs: 3, EpochResults: []EpochResult{{1, 1, 0.8, 4}},
			FinalTestAcc: 0.8, BestTestAcc: 0.8, TrainSeconds: 4, Status: "failed", Error: "diverged: loss is NaN"},
	}
}

// markdownTable splits the table lines of md into cells (header first,
// separator dropped).
func markdownTable(t *testing.T, md string) [][]string {
	t.Helper()
	var rows [][]string
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] != "---" {
			rows = append(rows, cells)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("no table in\n%s", md)
	}
	return rows
}

// byColumn maps each row's label to its cells by header name.
func byColumn(rows [][]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			m[h] = r[i]
		}
		out[r[0]] = m
	}
	return out
}

func TestReportTable(t *testing.T) {
	rs := reportResults()
	md := Markdown(Build(rs, nil, false))
	rows := markdownTable(t, md)
	var order []string
	for _, r := range rows[1:] {
		order = append(order, r[0])
	}
	if want := "gemini-fp16-2 low_level_zero-fp16-1 torch_ddp-fp32-1 torch_ddp-fp32-2"; strings.Join(order, " ") != want {
		t.Fatalf("row order %v, want %s\n%s", order, want, md)
	}
	dcol := "Δ vs torch_ddp-fp32-1 (pts)"
	cells := byColumn(rows)
	for run, want := range map[string]map[string]string{
		"torch_ddp-fp32-1": {"Final acc": "60.00%", "Best acc (epoch)": "62.00% (2)", dcol: "baseline",
			"Wall time": "33.0s", "Mean epoch": "11.0s", "Images/s": "4545", "Peak dev mem/rank": "1.00 GiB",
			"Epochs": "3/3", "Ranks": "1"},
		"gemini-fp16-2": {"Final acc": "65.00%", "Best acc (epoch)": "65.00% (3)", dcol: "+5.00",
			"Mean epoch": "9.0s", "Peak dev mem/rank": "1.50 GiB", "Images/s": "-"},
		"torch_ddp-fp32-2": {"Best acc (epoch)": "58.00% (3)", dcol: "-2.00"},
		// Another data set: no delta.
		"low_level_zero-fp16-1": {dcol: "-", "Status": "failed", "Epochs": "1/3"},
	} {
		for col, v := range want {
			if got := cells[run][col]; got != v {
				t.Errorf("%s %q = %q, want %q\n%s", run, col, got, v, md)
			}
		}
	}
	if !strings.Contains(md, "low_level_zero-fp16-1: diverged: loss is NaN") {
		t.Errorf("failed run's error missing:\n%s", md)
	}
}

func TestReportBaseline(t *testing.T) {
	mk := func(plugin, precision string, ranks int, status string) Row {
		return Row{Label: plugin, Source: SourceRun, Plugin: plugin, Precision: precision, WorldSize: ranks,
			Status: status, HasFinal: true, FinalAcc: 0.5, Dataset: "cifar10"}
	}
	rows := []Row{mk("gemini", "fp32", 1, "done"), mk("torch_ddp", "fp32", 1, "stopped"),
		mk("torch_ddp", "fp32", 1, "done"), mk("torch_ddp", "fp16", 1, "done")}
	if got := Baseline(rows); got != 2 {
		t.Errorf("baseline %d, want 2 (torch_ddp, done)", got)
	}
	if got := Baseline(rows[:2]); got != 1 {
		t.Errorf("baseline %d, want 1 (torch_ddp before status)", got)
	}
	none := []Row{mk("torch_ddp", "fp16", 1, "done"), mk("torch_ddp", "fp32", 2, "done")}
	if got := Baseline(none); got != -1 {
		t.Errorf("baseline %d, want -1", got)
	}
	if md := Markdown(none); strings.Contains(md, "Δ") {
		t.Errorf("delta column without an fp32 single-rank run:\n%s", md)
	}
}

func TestReportMultiSpecLabels(t *testing.T) {
	a, b := reportResults()[0], reportResults()[1]
	a.Spec, b.Spec = "zero", "smoke"
	rows := Build([]*Result{a, b}, nil, false)
	if rows[0].Label != "smoke/torch_ddp-fp32-1" || rows[1].Label != "zero/torch_ddp-fp32-2" {
		t.Errorf("labels %q %q", rows[0].Label, rows[1].Label)
	}
}

func TestReportReferenceRows(t *testing.T) {
	md := Markdown(Build(reportResults(), nil, true))
	cells := byColumn(markdownTable(t, md))
	dcol := "Δ vs torch_ddp-fp32-1 (pts)"
	for _, ref := range ReferenceCIFAR10 {
		row, ok := cells["reference: "+ref.Column]
		if !ok {
			t.Fatalf("no reference row %q:\n%s", ref.Column, md)
		}
		wantDelta := fmt.Sprintf("%+.2f", 100*(ref.Acc-0.60))
		if row["Final acc"] != pct(ref.Acc) || row["Source"] != SourceReference || row[dcol] != wantDelta {
			t.Errorf("reference %q: %v (want delta %s)", ref.Column, row, wantDelta)
		}
	}
	if !strings.Contains(md, "docs/design.md") {
		t.Errorf("reference rows not cited:\n%s", md)
	}
}

// The reference table must match docs/design.md's, read independently.
func TestReportReferenceMatchesDesignDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "## Reference accuracy")
	if !ok {
		t.Fatal("docs/design.md has no Reference accuracy section")
	}
	var table []string // the section's first table: head, separator, values
	for _, l := range strings.Split(after, "\n") {
		if strings.HasPrefix(l, "|") {
			table = append(table, l)
		} else if len(table) > 0 {
			break
		}
	}
	if len(table) != 3 {
		t.Fatalf("reference table has %d lines, want 3: %q", len(table), table)
	}
	heads, vals := strings.Split(strings.Trim(table[0], "| "), "|"), regexp.MustCompile(`[\d.]+%`).FindAllString(table[2], -1)
	if len(heads) != len(ReferenceCIFAR10) || len(vals) != len(ReferenceCIFAR10) {
		t.Fatalf("doc table %q / %q has %d columns, code has %d", table[0], table[2], len(heads), len(ReferenceCIFAR10))
	}
	for i, ref := range ReferenceCIFAR10 {
		v, _ := strconv.ParseFloat(strings.TrimSuffix(vals[i], "%"), 64)
		if strings.TrimSpace(heads[i]) != ref.Column || math.Abs(v/100-ref.Acc) > 1e-9 {
			t.Errorf("column %d: doc %q %s, code %q %v", i, heads[i], vals[i], ref.Column, ref.Acc)
		}
	}
}

func TestReportFormatWall(t *testing.T) {
	for s, want := range map[float64]string{0: "-", 12.34: "12.3s", 245: "4m05s", 3725: "1h02m"} {
		if got := formatWall(s); got != want {
			t.Errorf("formatWall(%v) = %q, want %q", s, got, want)
		}
	}
}

func TestReportMarkdownEscapesPipes(t *testing.T) {
	md := Markdown([]Row{{Label: "a|b", Source: SourceRun}})
	rows := markdownTable(t, strings.ReplaceAll(md, `\|`, "¦"))
	if len(rows) != 2 || len(rows[1]) != len(rows[0]) || rows[1][0] != "a¦b" {
		t.Errorf("pipe split the row: %q", md)
	}
}

// A result file whose final accuracy was null (read back as 0) shows the
// last evaluated epoch; one with no evaluated epoch shows none.
func TestReportFinalFallback(t *testing.T) {
	r := reportResults()[1]
	r.FinalTestAcc = 0
	if row := ResultRow(r, false); !row.HasFinal || row.FinalAcc != 0.60 || row.BestEpoch != 2 {
		t.Errorf("row %+v", row)
	}
	r.EpochResults, r.BestTestAcc = []EpochResult{{Epoch: 1, TestAcc: math.NaN()}}, 0
	if row := ResultRow(r, false); row.HasFinal || row.BestAcc != 0 || len(row.Curve) != 0 {
		t.Errorf("row without evaluated epochs %+v", row)
	}
}
