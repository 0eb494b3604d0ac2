package report

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"resnetlab/fsutil"
	"strings"

	"resnetlab/spec"
)

// ErrNothingToPlot says that no run has an evaluated epoch (a run
// interrupted in its first epoch, say).
var ErrNothingToPlot = errors.New("plot: no run has an evaluated epoch, nothing to draw")

// Default size of the comparison figure, in pixels.
const (
	DefaultPlotWidth  = 1200
	DefaultPlotHeight = 860
)

// plotPalette is a set of ten well-separated line colours (matplotlib's
// "tab10"); runs past the tenth reuse them with another marker and dash.
var plotPalette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

var (
	plotBackground = color.RGBA{0xff, 0xff, 0xff, 0xff}
	plotInk        = color.RGBA{0x20, 0x20, 0x20, 0xff}
	plotGrid       = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	plotFrameColor = color.RGBA{0x90, 0x90, 0x90, 0xff}
	plotRefColor   = color.RGBA{0x60, 0x60, 0x60, 0xff}
)

// plotColor is the colour of the i-th run of a figure.
func plotColor(i int) color.RGBA { return plotPalette[i%len(plotPalette)] }

// plotDashed is the dash of the i-th run: every other run is dashed, so a
// run drawn over an identical one leaves gaps the one below shows through.
func plotDashed(i int) bool { return i%2 == 1 }

// plotMarker is the marker shape of the i-th run.
func plotMarker(i int) markerShape { return markerShape(i % int(numMarkers)) }

// plotCurves are the rows that have an accuracy curve, in order: the i-th
// is drawn in plotColor(i). Reference rows have no curve.
func plotCurves(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if len(r.Curve) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// PlotFormat is the figure format a file name's extension names: "png" or
// "svg"; any other extension is an error naming the file.
func PlotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("%s: unknown picture format %q (want .png or .svg)", path, ext)
	}
}

// Plot writes the comparison figure of rows in format ("png" or "svg"):
// test accuracy and training loss per epoch of every run with a curve (one
// colour, marker and dash per run), the reference's published accuracy
// when every run is on CIFAR-10, peak memory bars (device per rank, host)
// and images/s bars, and a legend with one entry per run.
func Plot(w io.Writer, rows []Row, format string, width, height int) error {
	sc, err := plotScene(rows, width, height)
	if err != nil {
		return err
	}
	switch format {
	case "png":
		return sc.writePNG(w)
	case "svg":
		return sc.writeSVG(w)
	}
	return fmt.Errorf("plot: unknown format %q (want png or svg)", format)
}

// plotLayout places the figure's parts: two curve panels on top, two bar
// panels below, the legend under them.
type plotLayout struct {
	scale                int
	acc, loss, mem, tput image.Rectangle // the panels' data areas
	legend               image.Rectangle
}

// legendRowH is the height of one legend entry at scale s.
func legendRowH(s int) int { return glyphH*s + 6*s }

// legendColumns is how many legend entries share a row.
const legendColumns = 2

// newPlotLayout places the parts for a legend of runs entries plus, with
// refs, a line naming the reference accuracies.
func newPlotLayout(width, height, runs int, refs bool) plotLayout {
	s := 1
	if width >= 900 && height >= 600 {
		s = 2
	}
	lineH := glyphH * s
	legendRows := (runs + legendColumns - 1) / legendColumns
	if refs {
		legendRows++
	}
	legendH := 8*s + legendRows*legendRowH(s)
	l := plotLayout{scale: s}
	l.legend = image.Rect(8*s, height-legendH-4*s, width-8*s, height-4*s)
	left := textWidth("10000", s) + 10*s
	gap := 3*left/2 + 8*s
	colW := (width - left - gap - 8*s) / 2
	top := 2*lineH + 8*s
	panelsH := l.legend.Min.Y - top
	rowH := (panelsH - 2*(2*lineH+14*s)) / 2
	if rowH < 40 {
		rowH = 40
	}
	x0, x1 := left, left+colW+gap
	l.acc = image.Rect(x0, top, x0+colW, top+rowH)
	l.loss = image.Rect(x1, top, x1+colW, top+rowH)
	top2 := l.acc.Max.Y + 2*lineH + 14*s + 2*lineH
	l.mem = image.Rect(x0, top2, x0+colW, top2+rowH-2*lineH)
	l.tput = image.Rect(x1, top2, x1+colW, top2+rowH-2*lineH)
	return l
}

// plotScene draws the figure into a resolution-free scene.
func plotScene(rows []Row, width, height int) (*scene, error) {
	curves := plotCurves(rows)
	if len(curves) == 0 {
		return nil, ErrNothingToPlot
	}
	if width < 400 || height < 300 {
		return nil, fmt.Errorf("plot: size %dx%d is too small (want at least 400x300)", width, height)
	}
	refs := referenceLines(curves)
	l := newPlotLayout(width, height, len(curves), len(refs) > 0)
	if l.legend.Min.Y < height/3 {
		return nil, fmt.Errorf("plot: %d runs do not fit a %dx%d picture", len(curves), width, height)
	}
	sc := &scene{width: width, height: height, scale: l.scale}
	sc.fill(image.Rect(0, 0, width, height), plotBackground)
	accLo, accHi := curveRange(curves, func(e EpochResult) float64 { return 100 * e.TestAcc })
	for _, r := range refs {
		accLo, accHi = math.Min(accLo, 100*r.acc), math.Max(accHi, 100*r.acc)
	}
	acc := newAxes(sc, l.acc, curves, accLo, accHi, true)
	acc.draw("test accuracy (%)")
	for _, r := range refs {
		acc.refLine(100 * r.acc)
	}
	lossLo, lossHi := curveRange(curves, func(e EpochResult) float64 { return e.Loss })
	loss := newAxes(sc, l.loss, curves, lossLo, lossHi, false)
	loss.draw("training loss")
	for i, r := range curves {
		acc.curve(r.Curve, i, func(e EpochResult) float64 { return 100 * e.TestAcc })
		loss.curve(r.Curve, i, func(e EpochResult) float64 { return e.Loss })
	}
	memoryBars(sc, l.mem, curves)
	throughputBars(sc, l.tput, curves)
	drawLegend(sc, l.legend, curves, refs)
	return sc, nil
}

// reference is one published accuracy drawn across the accuracy panel.
type reference struct {
	label string
	acc   float64
}

// referenceLines are the published CIFAR-10 accuracies of the plugins of
// curves (the single-GPU column for one-rank torch_ddp runs), or none when
// a run is on another data set: the reference says nothing about those.
func referenceLines(curves []Row) []reference {
	var out []reference
	seen := map[string]bool{}
	for _, r := range curves {
		if r.Dataset != "cifar10" {
			return nil
		}
		for _, ref := range ReferenceCIFAR10 {
			if ref.Plugin != r.Plugin || seen[ref.Column] {
				continue
			}
			if ref.Plugin == spec.PluginTorchDDP && (ref.Ranks == 1) != (r.WorldSize == 1) {
				continue
			}
			seen[ref.Column] = true
			out = append(out, reference{label: fmt.Sprintf("%s %.2f", ref.Column, 100*ref.Acc), acc: ref.Acc})
		}
	}
	return out
}

// curveRange is the range of the finite values of every curve.
func curveRange(curves []Row, v func(EpochResult) float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range curves {
		for _, e := range r.Curve {
			if x := v(e); !math.IsNaN(x) && !math.IsInf(x, 0) {
				lo, hi = math.Min(lo, x), math.Max(hi, x)
			}
		}
	}
	if lo > hi {
		return 0, 1
	}
	return lo, hi
}

// niceStep is the smallest of ..., 0.1, 0.2, 0.5, 1, 2, 5, 10, ... that
// cuts span into at most maxTicks intervals.
func niceStep(span float64, maxTicks int) float64 {
	maxTicks = max(maxTicks, 1)
	if !(span > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(span/float64(maxTicks))))
	for ; ; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if span/(m*p) <= float64(maxTicks)+1e-9 {
				return m * p
			}
		}
	}
}

// plotTicks are the multiples of step in [lo, hi].
func plotTicks(lo, hi, step float64) []float64 {
	var out []float64
	for v := math.Ceil(lo/step-1e-9) * step; v <= hi+1e-9*step; v += step {
		out = append(out, v)
	}
	return out
}

// tickLabel prints v with as many decimals as step needs.
func tickLabel(v, step float64) string {
	d := 0
	for s := step; s < 1-1e-9 && d < 4; s *= 10 {
		d++
	}
	if math.Abs(v) < step*1e-6 { // not "-0"
		v = 0
	}
	return fmt.Sprintf("%.*f", d, v)
}

// PlotPaths are where WritePlots puts a spec's figures: DIR/<spec>.png
// and DIR/<spec>.svg (the spec name made file-safe like result files').
func PlotPaths(dir, specName string) (pngPath, svgPath string) {
	name := strings.TrimSuffix(spec.ResultFile("", specName), ".json")
	if name == "" {
		name = "runs"
	}
	base := filepath.Join(dir, name)
	return base + ".png", base + ".svg"
}

// WritePlots draws the figure of results as PNG and SVG and writes both
// to PlotPaths(dir, specName), atomically, creating dir if needed; both
// are rendered before either is written. It returns the paths written.
func WritePlots(dir, specName string, results []*Result) ([]string, error) {
	rows := Build(results, nil, false)
	pngPath, svgPath := PlotPaths(dir, specName)
	var pics [2]bytes.Buffer
	for i, format := range []string{"png", "svg"} {
		if err := Plot(&pics[i], rows, format, DefaultPlotWidth, DefaultPlotHeight); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot %s: %w", pngPath, err)
	}
	paths := []string{pngPath, svgPath}
	for i, p := range paths {
		if err := fsutil.WriteFileAtomic(p, func(w io.Writer) error {
			_, err := w.Write(pics[i].Bytes())
			return err
		}); err != nil {
			return nil, fmt.Errorf("plot %s: %w", p, err)
		}
	}
	return paths, nil
}
