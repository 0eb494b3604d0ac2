package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/runner"
	"resnetlab/spec"
)

// A grid that ends in the UI leaves, once the UI has quit, the table that
// headless prints: the comparison of the runs' results, in grid order.
func TestUIEndLeavesHeadlessTable(t *testing.T) {
	sp, dir := quitSpec(t)
	cl, out, errb := testCLI()
	cl.isTTY = func() bool { return true }
	cl.runSpec = runner.RunSpec
	cl.tui = func(ctx context.Context, s *spec.Spec, cells []spec.Cell, ev <-chan runner.Event, cmds chan<- runner.Command) error {
		left := len(cells)
		for e := range ev { // the user watches every run finish, then quits
			if _, ok := e.(runner.RunFinished); ok {
				if left--; left == 0 {
					return nil
				}
			}
		}
		return nil
	}
	code := runCLI(cl, "run", sp)
	paths, _ := filepath.Glob(filepath.Join(dir, "results", "*.json"))
	if len(paths) != 2 {
		t.Fatalf("exit %d, results %v, stderr %s", code, paths, errb)
	}
	rs, err := report.ReadResults(paths)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Plugin != "torch_ddp" { // grid order: torch_ddp, then gemini
		rs[0], rs[1] = rs[1], rs[0]
	}
	pngPath, svgPath := report.PlotPaths(filepath.Join(dir, "results"), "q")
	want := "\n" + report.CompareTable(rs) + "comparison figure: " + pngPath + ", " + svgPath + "\n"
	if out.String() != want || code != exitOK {
		t.Fatalf("exit %d, stdout\n%q\nwant\n%q\nstderr %s", code, out, want, errb)
	}
	checkFigures(t, pngPath, svgPath)

	// Headless prints the same table (its timing columns aside) after its lines.
	hspec, hdir := quitSpec(t)
	hl, hout, herrb := testCLI()
	hl.runSpec = runner.RunSpec
	if code := runCLI(hl, "run", "--headless", hspec); code != exitOK {
		t.Fatalf("headless: exit %d, stderr %s", code, herrb)
	}
	hpng, hsvg := report.PlotPaths(filepath.Join(hdir, "results"), "q")
	checkFigures(t, hpng, hsvg)
	ui := strings.Split(strings.TrimPrefix(out.String(), "\n"), "\n")
	hd := strings.Split(hout.String(), "\n")
	at := len(hd) - len(ui)
	if at < 1 || hd[at-1] != "" || hd[at] != ui[0] {
		t.Fatalf("headless output does not end with the same table:\n%s\nUI:\n%s", hout, out)
	}
}

// checkFigures: a run's PNG decodes and its SVG is XML.
func checkFigures(t *testing.T, pngPath, svgPath string) {
	t.Helper()
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("%s: %v", pngPath, err)
	}
	b, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	for d := xml.NewDecoder(bytes.NewReader(b)); ; {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: not XML: %v", svgPath, err)
		}
	}
}

// After the UI quits on a failed run, on a terminal of 80 columns, the
// run's error is printed whole, wrapped at spaces (never cut: a too-small
// Gemini budget's message ends with the budget to set), under a table
// that fits the 80 columns; the last line names the failed run.
func TestUIEndPrintsWholeErrorsIn80Columns(t *testing.T) {
	dir := t.TempDir()
	sp := writeSpec(t, tinyRun(dir, "[grid]\nplugin = [\"gemini\"]\n[gemini]\ndevice_budget = \"1KiB\""))
	cl, out, errb := realCLI()
	cl.isTTY = func() bool { return true }
	cl.width = func(io.Writer) int { return 80 }
	var shown string // the error as the UI had it
	cl.tui = func(ctx context.Context, s *spec.Spec, cells []spec.Cell, ev <-chan runner.Event, cmds chan<- runner.Command) error {
		for e := range ev {
			if f, ok := e.(runner.RunFinished); ok && f.Err != nil {
				shown = f.Err.Error()
				return nil
			}
		}
		return nil
	}
	if code := runCLI(cl, "run", sp); code != exitFailed {
		t.Fatalf("exit %d, want 1; stderr %s", code, errb)
	}
	if !strings.Contains(shown, `e.g. device_budget = "`) {
		t.Fatalf("the run's error is not the too-small budget's: %q", shown)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for _, l := range lines {
		if n := ansi.StringWidth(l); n > 80 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	// The table's header, its row, then the error from its first word to
	// its last, continued on indented lines.
	if len(lines) < 4 || lines[0] != "" || !strings.HasPrefix(lines[1], "RUN ") || !strings.HasPrefix(lines[2], "gemini-fp16-1 ") {
		t.Fatalf("stdout:\n%s", out)
	}
	var errLines []string
	for i, l := range lines[3:] {
		if strings.HasPrefix(l, "(left out to fit") && i == 0 {
			continue
		}
		errLines = append(errLines, l)
	}
	joined := strings.ReplaceAll(strings.Join(errLines, "\n"), "\n  ", " ")
	if want := "gemini-fp16-1: " + strings.Join(strings.Fields(shown), " "); joined != want {
		t.Errorf("the error after the UI:\n%s\nwant it whole:\n%s", strings.Join(errLines, "\n"), want)
	}
	if errb.String() != "resnetlab run: 1 of 1 run failed: gemini-fp16-1\n" {
		t.Errorf("stderr %q", errb)
	}
}

// Headless on a terminal of 80 columns, the table at the end fits them.
func TestHeadlessTableFits80Columns(t *testing.T) {
	sp, _ := quitSpec(t)
	cl, out, errb := realCLI()
	cl.width = func(io.Writer) int { return 80 }
	if code := runCLI(cl, "run", "--headless", sp); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errb)
	}
	_, table, ok := strings.Cut(out.String(), "\n\nRUN ")
	if !ok {
		t.Fatalf("no table:\n%s", out)
	}
	table, _, _ = strings.Cut(table, "\ncomparison figure: ")
	lines := strings.Split("RUN "+table, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "torch_ddp-fp32-1 ") || !strings.HasPrefix(lines[2], "gemini-fp16-1 ") {
		t.Fatalf("table:\n%s", table)
	}
	for _, l := range lines {
		if n := ansi.StringWidth(l); n > 80 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
}

// A run of part of the grid (--run) redraws the figure with the whole grid:
// its own result and the other runs' result files of the same recipe.
func TestFigureKeepsTheWholeGrid(t *testing.T) {
	sp, pngPath, svgPath := trainedGrid(t)
	again, out, errb := testCLI()
	again.runSpec = runner.RunSpec
	if code := runCLI(again, "run", "--headless", "--run", "torch_ddp-fp32-1", sp); code != exitOK {
		t.Fatalf("--run: exit %d, stderr %s", code, errb)
	}
	want := "comparison figure: " + pngPath + ", " + svgPath + " (1 run of this session, 1 from earlier result files)\n"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("stdout\n%s\nwant a line %q", out, want)
	}
	checkFigures(t, pngPath, svgPath)
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"torch_ddp-fp32-1", "gemini-fp16-1"} {
		if !bytes.Contains(svg, []byte(run)) {
			t.Errorf("%s does not name %s", svgPath, run)
		}
	}
}

// A run of this session that fails before training (its checkpoint
// directory in use by another run) leaves the comparison figure as it was
// and says nothing of one: its cell keeps its earlier curve.
func TestFailedRunLeavesTheFigure(t *testing.T) {
	sp, pngPath, svgPath := trainedGrid(t)
	before := [2][]byte{}
	for i, p := range []string{pngPath, svgPath} {
		var err error
		if before[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := ckpt.LockDir(filepath.Join(filepath.Dir(filepath.Dir(pngPath)), "ck", "torch_ddp"), "another")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	again, out, errb := testCLI()
	again.runSpec = runner.RunSpec
	if code := runCLI(again, "run", "--headless", "--resume", "1", "--run", "torch_ddp-fp32-1", sp); code != exitFailed {
		t.Fatalf("a run whose checkpoint directory is locked: exit %d, stderr %s", code, errb)
	}
	if strings.Contains(out.String(), "comparison figure") {
		t.Errorf("stdout names a figure after a failed run:\n%s", out)
	}
	for i, p := range []string{pngPath, svgPath} {
		if now, _ := os.ReadFile(p); !bytes.Equal(now, before[i]) {
			t.Errorf("%s was redrawn by a run that failed before training", p)
		}
	}
}

// trainedGrid trains quitSpec's whole grid headless and returns the spec
// and the comparison figure's paths.
func trainedGrid(t *testing.T) (sp, png, svg string) {
	t.Helper()
	sp, dir := quitSpec(t)
	cl, _, errb := testCLI()
	cl.runSpec = runner.RunSpec
	if code := runCLI(cl, "run", "--headless", sp); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errb)
	}
	png, svg = report.PlotPaths(filepath.Join(dir, "results"), "q")
	return sp, png, svg
}

// A fresh rerun of a finished grid quit in the UI after its first epoch
// leaves the done run's result file, and the figure drawn from it, as they
// were, and says so once the UI has gone.
func TestPartialRerunKeepsResultAndFigure(t *testing.T) {
	sp, pngPath, svgPath := trainedGrid(t)
	result := filepath.Join(filepath.Dir(pngPath), "q-torch_ddp-fp32-1.json")
	var before [3][]byte
	for i, p := range []string{result, pngPath, svgPath} {
		var err error
		if before[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	cl, out, errb := testCLI()
	cl.isTTY = func() bool { return true }
	cl.runSpec = runner.RunSpec
	cl.tui = func(ctx context.Context, s *spec.Spec, cells []spec.Cell, ev <-chan runner.Event, cmds chan<- runner.Command) error {
		for e := range ev {
			if sd, ok := e.(runner.StepDone); ok && sd.Epoch == 2 && sd.Step == 2 {
				break
			}
		}
		cmds <- runner.Quit{Checkpoint: true}
		for e := range ev {
			if _, ok := e.(runner.RunFinished); ok {
				return nil
			}
		}
		return nil
	}
	if code := runCLI(cl, "run", sp); code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitInterrupted, errb)
	}
	for i, p := range []string{result, pngPath, svgPath} {
		if now, _ := os.ReadFile(p); !bytes.Equal(now, before[i]) {
			t.Errorf("%s changed after a partial rerun", p)
		}
	}
	if want := "torch_ddp-fp32-1: " + result + " left as it was: it records a complete training (done"; !strings.Contains(out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
}
