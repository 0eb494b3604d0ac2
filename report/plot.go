package report

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
)

// Default size of the accuracy plot, in pixels.
const (
	DefaultPlotWidth  = 960
	DefaultPlotHeight = 600
)

// plotPalette is a set of ten well-separated line colours (matplotlib's
// "tab10"); curves past the tenth reuse them, dashed.
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
)

// plotColor is the colour of the i-th curve of a plot.
func plotColor(i int) color.RGBA { return plotPalette[i%len(plotPalette)] }

// plotCurves are the rows that have an accuracy curve, in order: the i-th
// is drawn in plotColor(i).
func plotCurves(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if len(r.Curve) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// PlotAccuracy writes a width x height PNG of the test-accuracy curves
// (accuracy in % against epoch) of the rows that have one, one colour per
// row, peers dashed, with axes, ticks, grid and a legend. Reference rows
// have no curve and are not drawn.
func PlotAccuracy(w io.Writer, rows []Row, width, height int) error {
	curves := plotCurves(rows)
	if len(curves) == 0 {
		return errors.New("plot: no run has an evaluated epoch, nothing to draw")
	}
	if width < 200 || height < 150 {
		return fmt.Errorf("plot: size %dx%d is too small (want at least 200x150)", width, height)
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Rect, image.NewUniform(plotBackground), image.Point{}, draw.Src)
	f := newPlotFrame(img, curves)
	f.drawAxes()
	for i, r := range curves {
		f.drawCurve(r.Curve, plotColor(i), curveDashed(r, i))
	}
	f.drawLegend(curves)
	return png.Encode(w, img)
}

// curveDashed tells the peer's curves and the second round of colours
// apart from ours.
func curveDashed(r Row, i int) bool {
	return r.Source == SourcePeer || i >= len(plotPalette)
}

// plotFrame maps data (epoch, accuracy in %) to the pixels of area.
type plotFrame struct {
	img            *image.RGBA
	area           image.Rectangle
	x0, x1, xStep  float64
	y0, y1, yStep  float64
	scale, penSize int
}

func newPlotFrame(img *image.RGBA, curves []Row) *plotFrame {
	s := 1
	if img.Rect.Dx() >= 640 && img.Rect.Dy() >= 400 {
		s = 2
	}
	f := &plotFrame{img: img, scale: s, penSize: s}
	lineH := glyphH * s
	f.area = image.Rect(textWidth("100", s)+8*s, lineH+8*s, img.Rect.Dx()-8*s, img.Rect.Dy()-2*lineH-12*s)
	lo, hi, maxEpoch := curveExtent(curves)
	f.yStep = niceStep(hi-lo, 10)
	f.y0 = math.Max(0, math.Floor(lo/f.yStep)*f.yStep)
	f.y1 = math.Min(100, math.Ceil(hi/f.yStep)*f.yStep)
	if f.y1 <= f.y0 {
		f.y1 = f.y0 + f.yStep
	}
	f.x1 = float64(maxEpoch)
	f.xStep = niceStep(f.x1, min(10, f.area.Dx()/(textWidth("000", s)+12*s)))
	return f
}

// curveExtent is the accuracy range (in %) and the last epoch of curves.
func curveExtent(curves []Row) (lo, hi float64, maxEpoch int) {
	lo, hi = 100, 0
	for _, r := range curves {
		for _, e := range r.Curve {
			lo, hi = math.Min(lo, 100*e.TestAcc), math.Max(hi, 100*e.TestAcc)
			maxEpoch = max(maxEpoch, e.Epoch)
		}
	}
	return lo, hi, max(maxEpoch, 1)
}

// niceStep is the smallest of 1, 2, 5, 10, 20, 50, ... that cuts span into
// at most maxTicks intervals.
func niceStep(span float64, maxTicks int) float64 {
	maxTicks = max(maxTicks, 1)
	for p := 1.0; ; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if span/(m*p) <= float64(maxTicks) {
				return m * p
			}
		}
	}
}

func (f *plotFrame) px(epoch, accPct float64) image.Point {
	x := f.area.Min.X + int(math.Round((epoch-f.x0)/(f.x1-f.x0)*float64(f.area.Dx()-1)))
	y := f.area.Max.Y - 1 - int(math.Round((accPct-f.y0)/(f.y1-f.y0)*float64(f.area.Dy()-1)))
	return image.Pt(x, y)
}

// plotTicks are the multiples of step in [lo, hi].
func plotTicks(lo, hi, step float64) []float64 {
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func (f *plotFrame) drawAxes() {
	s, a := f.scale, f.area
	lineH := glyphH * s
	for _, v := range plotTicks(f.y0, f.y1, f.yStep) {
		p := f.px(f.x0, v)
		plotFill(f.img, image.Rect(a.Min.X, p.Y, a.Max.X, p.Y+1), plotGrid)
		plotFill(f.img, image.Rect(a.Min.X-4*s, p.Y, a.Min.X, p.Y+1), plotInk)
		label := fmt.Sprint(int(v))
		drawText(f.img, a.Min.X-6*s-textWidth(label, s), p.Y-lineH/2, label, s, plotInk)
	}
	for _, v := range plotTicks(f.x0, f.x1, f.xStep) {
		p := f.px(v, f.y0)
		plotFill(f.img, image.Rect(p.X, a.Min.Y, p.X+1, a.Max.Y), plotGrid)
		plotFill(f.img, image.Rect(p.X, a.Max.Y, p.X+1, a.Max.Y+4*s), plotInk)
		label := fmt.Sprint(int(v))
		drawText(f.img, p.X-textWidth(label, s)/2, a.Max.Y+6*s, label, s, plotInk)
	}
	plotBox(f.img, a.Inset(-1), plotFrameColor)
	plotFill(f.img, image.Rect(a.Min.X-1, a.Min.Y, a.Min.X, a.Max.Y+1), plotInk) // y axis
	plotFill(f.img, image.Rect(a.Min.X-1, a.Max.Y, a.Max.X, a.Max.Y+1), plotInk) // x axis
	xTitle := "epoch"
	drawText(f.img, a.Min.X+(a.Dx()-textWidth(xTitle, s))/2, a.Max.Y+lineH+10*s, xTitle, s, plotInk)
	drawText(f.img, a.Min.X, 4*s, "test accuracy (%)", s, plotInk)
}

func plotBox(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	plotFill(img, image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), c)
	plotFill(img, image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), c)
	plotFill(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), c)
	plotFill(img, image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), c)
}

// drawCurve joins the points of one curve, clipped to the plot area, with
// a dot on each point when there are few (a one-epoch curve is just dots).
func (f *plotFrame) drawCurve(es []EpochResult, c color.RGBA, dashed bool) {
	clip := f.img.SubImage(f.area).(*image.RGBA)
	pen := &plotPen{img: clip, c: c, size: f.penSize, dashed: dashed}
	for i := 1; i < len(es); i++ {
		pen.line(f.px(float64(es[i-1].Epoch), 100*es[i-1].TestAcc), f.px(float64(es[i].Epoch), 100*es[i].TestAcc))
	}
	if len(es) > 20 {
		return
	}
	r := 2 * f.penSize
	for _, e := range es {
		p := f.px(float64(e.Epoch), 100*e.TestAcc)
		plotFill(clip, image.Rect(p.X-r, p.Y-r, p.X+r+1, p.Y+r+1), c)
	}
}
