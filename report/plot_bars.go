package report

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strings"
)

// memoryBars draws each run's peak device memory per rank (solid) and its
// largest per-rank peak host memory (light), in MiB, one group per run
// labelled with its legend number.
func memoryBars(sc *scene, area image.Rectangle, curves []Row) {
	groups := make([][]barValue, len(curves))
	for i, r := range curves {
		for _, b := range r.PeakDevicePerRank {
			groups[i] = append(groups[i], barValue{float64(b) / (1 << 20), plotColor(i)})
		}
		if r.PeakHostBytes > 0 {
			groups[i] = append(groups[i], barValue{float64(r.PeakHostBytes) / (1 << 20), plotLight(plotColor(i))})
		}
	}
	barPanel(sc, area, "peak memory (MiB): device per rank, host light", groups)
}

// throughputBars draws each run's training images per second.
func throughputBars(sc *scene, area image.Rectangle, curves []Row) {
	groups := make([][]barValue, len(curves))
	for i, r := range curves {
		if r.ImagesPerSec > 0 {
			groups[i] = []barValue{{r.ImagesPerSec, plotColor(i)}}
		}
	}
	barPanel(sc, area, "throughput (images/s)", groups)
}

type barValue struct {
	v float64
	c color.RGBA
}

// plotLight is c halfway to white.
func plotLight(c color.RGBA) color.RGBA {
	return color.RGBA{uint8((int(c.R) + 255) / 2), uint8((int(c.G) + 255) / 2), uint8((int(c.B) + 255) / 2), 0xff}
}

// barPanel draws groups of bars from zero, one group per run, with a value
// axis, the run's legend number under its group and "--" where a run has
// no number.
func barPanel(sc *scene, area image.Rectangle, title string, groups [][]barValue) {
	s := sc.scale
	lineH := glyphH * s
	hi := 0.0
	for _, g := range groups {
		for _, b := range g {
			hi = math.Max(hi, b.v)
		}
	}
	step := niceStep(hi, max(2, min(8, area.Dy()/(lineH*3))))
	top := math.Max(step, math.Ceil(hi/step)*step)
	y := func(v float64) int { return area.Max.Y - int(math.Round(v/top*float64(area.Dy()))) }
	for _, v := range plotTicks(0, top, step) {
		py := y(v)
		sc.fill(image.Rect(area.Min.X, py, area.Max.X, py+1), plotGrid)
		sc.text(area.Min.X-6*s, py-lineH/2, tickLabel(v, step), anchorEnd, plotInk)
	}
	sc.box(area.Inset(-1), plotFrameColor)
	sc.text(area.Min.X, area.Min.Y-lineH-6*s, title, anchorStart, plotInk)
	slot := area.Dx() / max(1, len(groups))
	for i, g := range groups {
		x := area.Min.X + i*slot
		sc.text(x+slot/2, area.Max.Y+6*s, fmt.Sprint(i+1), anchorMiddle, plotInk)
		if len(g) == 0 {
			sc.text(x+slot/2, area.Max.Y-lineH-4*s, "--", anchorMiddle, plotInk)
			continue
		}
		inner := slot * 3 / 4
		w := max(1, inner/len(g))
		x0 := x + (slot-w*len(g))/2
		for j, b := range g {
			bx := x0 + j*w
			sc.fill(image.Rect(bx+max(1, w/10), y(b.v), bx+w-max(1, w/10), area.Max.Y), b.c)
		}
	}
}

// drawLegend lists the runs in a framed box, legendColumns to a row: the
// run's number, a stroke of its colour and dash with its marker, and its
// label; then, when there are reference lines, one row naming them.
func drawLegend(sc *scene, box image.Rectangle, curves []Row, refs []reference) {
	s := sc.scale
	pad, swatch, rowH := 4*s, 24*s, legendRowH(s)
	sc.box(box, plotFrameColor)
	colW := (box.Dx() - pad) / legendColumns
	for i, r := range curves {
		x := box.Min.X + pad + (i%legendColumns)*colW
		y := box.Min.Y + pad + 2*s + (i/legendColumns)*rowH
		mid := y + glyphH*s/2
		num := fmt.Sprintf("%d", i+1)
		sc.text(x, y, num, anchorStart, plotInk)
		sx := x + textWidth("00", s) + pad
		sc.polyline([]image.Point{{sx, mid}, {sx + swatch, mid}}, plotColor(i), s, plotDashed(i), box)
		sc.marker(image.Pt(sx+swatch/2, mid), plotMarker(i), plotColor(i))
		tx := sx + swatch + 2*pad
		sc.text(tx, y, fitText(r.Label, x+colW-tx-pad, s), anchorStart, plotInk)
	}
	if len(refs) == 0 {
		return
	}
	x := box.Min.X + pad + textWidth("00", s) + pad
	y := box.Min.Y + pad + 2*s + ((len(curves)+legendColumns-1)/legendColumns)*rowH
	mid := y + glyphH*s/2
	sc.polyline([]image.Point{{x, mid}, {x + swatch, mid}}, plotRefColor, s, true, box)
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.label
	}
	tx := x + swatch + 2*pad
	sc.text(tx, y, fitText("ColossalAI, CIFAR-10: "+strings.Join(names, ", "), box.Max.X-tx-pad, s), anchorStart, plotRefColor)
}

// legendSwatch is where drawLegend puts run i's marker (tests look there).
func legendSwatch(box image.Rectangle, i, s int) image.Point {
	pad, swatch, rowH := 4*s, 24*s, legendRowH(s)
	colW := (box.Dx() - pad) / legendColumns
	x := box.Min.X + pad + (i%legendColumns)*colW
	y := box.Min.Y + pad + 2*s + (i/legendColumns)*rowH
	return image.Pt(x+textWidth("00", s)+pad+swatch/2, y+glyphH*s/2)
}
