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
