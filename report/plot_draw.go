package report

import (
	"image"
	"image/color"
)

// Dash pattern of dashed curves, in pen steps.
const dashOn, dashOff = 8, 5

// plotPen draws Bresenham lines with a square pen. Its dash phase carries
// over from one segment to the next so a dashed curve stays regular.
type plotPen struct {
	img    *image.RGBA
	c      color.RGBA
	size   int
	dashed bool
	phase  int
}

func (p *plotPen) line(a, b image.Point) {
	dx, dy := plotAbs(b.X-a.X), -plotAbs(b.Y-a.Y)
	sx, sy := plotSign(b.X-a.X), plotSign(b.Y-a.Y)
	err := dx + dy
	for x, y := a.X, a.Y; ; {
		p.dot(x, y)
		if x == b.X && y == b.Y {
			return
		}
		e2 := 2 * err
		if e2 >= dy {
			err += dy
			x += sx
		}
		if e2 <= dx {
			err += dx
			y += sy
		}
	}
}

func (p *plotPen) dot(x, y int) {
	p.phase = (p.phase + 1) % (dashOn + dashOff)
	if p.dashed && p.phase >= dashOn {
		return
	}
	lo := p.size / 2
	plotFill(p.img, image.Rect(x-lo, y-lo, x-lo+p.size, y-lo+p.size), p.c)
}

func plotAbs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func plotSign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// drawLegend lists the curves in a framed box in the lower right corner of
// the plot area (accuracy curves rise, so that corner is mostly empty),
// each label after a stroke of its curve's colour and dash.
func (f *plotFrame) drawLegend(curves []Row) {
	s := f.scale
	pad, swatch, rowH := 4*s, 16*s, glyphH*s+4*s
	maxText := f.area.Dx()*3/5 - swatch - 3*pad
	labels := make([]string, len(curves))
	textW := 0
	for i, r := range curves {
		labels[i] = fitText(r.Label, maxText, s)
		textW = max(textW, textWidth(labels[i], s))
	}
	w, h := pad+swatch+pad+textW+pad, pad+rowH*len(curves)
	box := image.Rect(f.area.Max.X-w-6*s, f.area.Max.Y-h-6*s, f.area.Max.X-6*s, f.area.Max.Y-6*s)
	plotFill(f.img, box, plotBackground)
	plotBox(f.img, box, plotFrameColor)
	for i, r := range curves {
		y := box.Min.Y + pad + i*rowH
		mid := y + glyphH*s/2
		pen := &plotPen{img: f.img, c: plotColor(i), size: f.penSize, dashed: curveDashed(r, i)}
		pen.line(image.Pt(box.Min.X+pad, mid), image.Pt(box.Min.X+pad+swatch, mid))
		drawText(f.img, box.Min.X+2*pad+swatch, y, labels[i], s, plotInk)
	}
}

// fitText shortens s with a trailing ".." until it is at most width pixels
// wide at scale.
func fitText(s string, width, scale int) string {
	r := []rune(s)
	if textWidth(s, scale) <= width {
		return s
	}
	for len(r) > 0 && textWidth(string(r)+"..", scale) > width {
		r = r[:len(r)-1]
	}
	return string(r) + ".."
}
