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
