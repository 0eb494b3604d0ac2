package report

import (
	"fmt"
	"image"
	"math"
)

// axes maps (epoch, value) to the pixels of one curve panel.
type axes struct {
	sc            *scene
	area          image.Rectangle
	x0, x1, xStep float64
	y0, y1, yStep float64
}

// newAxes spans epochs 0..last and [lo, hi] (rounded out to ticks; within
// 0..100 for percentages).
func newAxes(sc *scene, area image.Rectangle, curves []Row, lo, hi float64, pct bool) *axes {
	a := &axes{sc: sc, area: area}
	s := sc.scale
	last := 1
	for _, r := range curves {
		for _, e := range r.Curve {
			last = max(last, e.Epoch)
		}
	}
	a.yStep = niceStep(hi-lo, max(2, min(10, area.Dy()/(glyphH*s*3))))
	a.y0 = math.Floor(lo/a.yStep) * a.yStep
	a.y1 = math.Ceil(hi/a.yStep) * a.yStep
	if pct {
		a.y0, a.y1 = math.Max(0, a.y0), math.Min(100, a.y1)
	}
	if a.y1 <= a.y0 {
		a.y1 = a.y0 + a.yStep
	}
	a.x1 = float64(last)
	a.xStep = math.Max(1, niceStep(a.x1, min(10, area.Dx()/(textWidth("000", s)+12*s))))
	return a
}

func (a *axes) px(x, y float64) image.Point {
	return image.Pt(
		a.area.Min.X+int(math.Round((x-a.x0)/(a.x1-a.x0)*float64(a.area.Dx()-1))),
		a.area.Max.Y-1-int(math.Round((y-a.y0)/(a.y1-a.y0)*float64(a.area.Dy()-1))))
}

// draw draws grid, ticks, frame and titles.
func (a *axes) draw(title string) {
	s, r, sc := a.sc.scale, a.area, a.sc
	lineH := glyphH * s
	for _, v := range plotTicks(a.y0, a.y1, a.yStep) {
		p := a.px(a.x0, v)
		sc.fill(image.Rect(r.Min.X, p.Y, r.Max.X, p.Y+1), plotGrid)
		sc.fill(image.Rect(r.Min.X-4*s, p.Y, r.Min.X, p.Y+1), plotInk)
		sc.text(r.Min.X-6*s, p.Y-lineH/2, tickLabel(v, a.yStep), anchorEnd, plotInk)
	}
	for _, v := range plotTicks(a.x0, a.x1, a.xStep) {
		p := a.px(v, a.y0)
		sc.fill(image.Rect(p.X, r.Min.Y, p.X+1, r.Max.Y), plotGrid)
		sc.fill(image.Rect(p.X, r.Max.Y, p.X+1, r.Max.Y+4*s), plotInk)
		sc.text(p.X, r.Max.Y+6*s, fmt.Sprint(int(v)), anchorMiddle, plotInk)
	}
	sc.box(r.Inset(-1), plotFrameColor)
	sc.text(r.Min.X+r.Dx()/2, r.Max.Y+lineH+10*s, "epoch", anchorMiddle, plotInk)
	sc.text(r.Min.X, r.Min.Y-lineH-6*s, title, anchorStart, plotInk)
}

// refLine draws a published accuracy as a thin dashed grey line (the
// legend names it: labels here would overlap, the numbers are close).
func (a *axes) refLine(v float64) {
	if v < a.y0 || v > a.y1 {
		return
	}
	a.sc.polyline([]image.Point{a.px(a.x0, v), a.px(a.x1, v)}, plotRefColor, 1, true, a.area)
}

// curve draws run i's curve of v, clipped to the panel: a line in the
// run's colour and dash, and its marker on every point (so a curve hidden
// under an identical one still shows its markers). Non-finite values
// break the line.
func (a *axes) curve(es []EpochResult, i int, v func(EpochResult) float64) {
	var seg []image.Point
	flush := func() {
		if len(seg) > 1 {
			a.sc.polyline(seg, plotColor(i), a.sc.scale, plotDashed(i), a.area)
		}
		seg = nil
	}
	var pts []image.Point
	for _, e := range es {
		y := v(e)
		if math.IsNaN(y) || math.IsInf(y, 0) {
			flush()
			continue
		}
		p := a.px(float64(e.Epoch), y)
		seg = append(seg, p)
		pts = append(pts, p)
	}
	flush()
	if len(pts) > 60 { // markers would merge into a band
		return
	}
	for _, p := range pts {
		if p.In(a.area.Inset(-2)) {
			a.sc.marker(p, plotMarker(i), plotColor(i))
		}
	}
}
