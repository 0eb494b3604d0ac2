package tui

import (
	"math"
	"strings"

	"charm.land/lipgloss/v2"
)

// series is one run's curve in a multiPlot: evenly spaced values from
// x = x0 to x = x1 (in epochs), drawn in the run's colour, with its marker
// on the points listed in marks.
type series struct {
	ys     []float64
	x0, x1 float64
	marks  []int // indices of ys that get the marker
	mark   rune
	style  lipgloss.Style
}

// multiPlot overlays several series on shared axes: the lines are braille
// dots (rasterize, as the single-run plot), every series keeps its own
// marker, and a marker that would land on another's cell moves to the
// nearest free cell, so identical curves stay visible side by side.
type multiPlot struct {
	series   []series
	xMin     float64 // x of the left edge
	xMax     float64 // x of the right edge
	xLo, xHi string
	yFmt     func(float64) string
	cursor   float64 // x of the epoch cursor; NaN: none
	dim      lipgloss.Style
}

// cellOf is what one plot cell shows: braille dots of the series drawn
// there (coloured as the last one), or a marker.
type cellOf struct {
	dots  rune
	owner int // series of the dots or the marker, -1: none
	mark  rune
}

// render draws the series into exactly h lines of w cells, in the frame
// (labels and axes) of a single-run plot of all their values.
func (p multiPlot) render(w, h int) []string {
	var all []float64
	for _, s := range p.series {
		all = append(all, s.ys...)
	}
	base := plot{ys: all, xLo: p.xLo, xHi: p.xHi, yFmt: p.yFmt}
	return base.frame(w, h, func(lo, hi float64, cw, rows int) []string {
		grid := p.cells(lo, hi, cw, rows)
		lines := make([]string, rows)
		for r := range lines {
			lines[r] = p.line(grid[r])
		}
		return lines
	})
}

// xCell maps an x value to a cell column of a cw-cell plot.
func (p multiPlot) xCell(x float64, cw int) int {
	span := p.xMax - p.xMin
	if span <= 0 {
		return 0
	}
	return min(max(int(math.Round((x-p.xMin)/span*float64(cw-1))), 0), cw-1)
}

func (p multiPlot) cells(lo, hi float64, cw, rows int) [][]cellOf {
	grid := make([][]cellOf, rows)
	for r := range grid {
		grid[r] = make([]cellOf, cw)
		for c := range grid[r] {
			grid[r][c].owner = -1
		}
	}
	pw, ph := 2*cw, 4*rows
	span := p.xMax - p.xMin
	for k, s := range p.series {
		if len(s.ys) == 0 || span <= 0 {
			continue
		}
		// The series covers pixel columns a..b of the plot; rasterize draws
		// it into that sub-width and the dots are copied over.
		a := int(math.Round((s.x0 - p.xMin) / span * float64(pw-1)))
		b := int(math.Round((s.x1 - p.xMin) / span * float64(pw-1)))
		a, b = max(a, 0), min(max(b, a), pw-1)
		sub := rasterize(s.ys, lo, hi, b-a+1, ph)
		for y, row := range sub {
			for x, on := range row {
				if on {
					c := &grid[y/4][(a+x)/2]
					c.dots |= brailleBit[(a+x)%2][y%4]
					c.owner = k
				}
			}
		}
	}
	for k, s := range p.series {
		n := len(s.ys)
		for _, i := range s.marks {
			if i < 0 || i >= n || !finite(s.ys[i]) {
				continue
			}
			x := s.x0
			if n > 1 {
				x += (s.x1 - s.x0) * float64(i) / float64(n-1)
			}
			y := int(math.Round((hi - s.ys[i]) / (hi - lo) * float64(rows-1)))
			placeMark(grid, min(max(y, 0), rows-1), p.xCell(x, cw), k, s.mark)
		}
	}
	return grid
}

// placeMark puts series k's marker at (r, c) or, when another series'
// marker is there, at the nearest free cell beside, above or below it.
func placeMark(grid [][]cellOf, r, c, k int, mark rune) {
	for _, d := range [][2]int{{0, 0}, {0, 1}, {0, -1}, {-1, 0}, {1, 0}, {0, 2}, {0, -2}, {-1, 1}, {1, 1}, {-1, -1}, {1, -1}} {
		y, x := r+d[0], c+d[1]
		if y < 0 || y >= len(grid) || x < 0 || x >= len(grid[y]) {
			continue
		}
		g := &grid[y][x]
		if g.mark == 0 || g.owner == k {
			g.mark, g.owner = mark, k
			return
		}
	}
}

// line renders one row of cells, one style call per run of equal owners.
func (p multiPlot) line(row []cellOf) string {
	cur := p.xCell(p.cursor, len(row))
	var b, seg strings.Builder
	owner := -2
	flush := func() {
		if seg.Len() == 0 {
			return
		}
		switch {
		case owner >= 0:
			b.WriteString(p.series[owner].style.Render(seg.String()))
		case owner == -3:
			b.WriteString(p.dim.Render(seg.String()))
		default:
			b.WriteString(seg.String())
		}
		seg.Reset()
	}
	for c, cell := range row {
		o, ch := cell.owner, cell.mark
		if ch == 0 {
			ch = 0x2800 | cell.dots
		}
		if ch == 0x2800 && finite(p.cursor) && c == cur {
			o, ch = -3, '┊'
		} else if ch == 0x2800 {
			o = -1
		}
		if o != owner {
			flush()
			owner = o
		}
		seg.WriteRune(ch)
	}
	flush()
	return b.String()
}
