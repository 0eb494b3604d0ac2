package tui

import (
	"math"
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// plot is a line chart drawn with braille characters: every cell holds a
// 2x4 grid of dots, so a w x h cell plot has 2w x 4h pixels.
type plot struct {
	ys         []float64 // values at evenly spaced x positions
	xLo, xHi   string    // labels under the first and last x position
	yFmt       func(float64) string
	yMin, yMax float64 // fixed range when yMin < yMax, else the data's range
}

// brailleBit[col][row] is the dot of a braille cell (U+2800 block).
var brailleBit = [2][4]rune{{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}}

// render draws the plot into exactly h lines of w cells: a y-axis label
// column, the braille area and one line of x-axis labels.
func (p plot) render(w, h int) []string {
	return p.frame(w, h, func(lo, hi float64, cw, rows int) []string {
		grid := rasterize(p.ys, lo, hi, 2*cw, 4*rows)
		lines := make([]string, rows)
		for r := range lines {
			lines[r] = cells(grid, r, cw)
		}
		return lines
	})
}

// frame draws exactly h lines of w cells: the y-axis labels of p's value
// range, the axis, the drawing area and one line of x-axis labels. area
// draws the values from lo to hi into cw cells by rows lines, one string
// a line.
func (p plot) frame(w, h int, area func(lo, hi float64, cw, rows int) []string) []string {
	if h < 2 || w < 8 {
		return fitBlock(nil, w, h)
	}
	lo, hi, ok := p.yRange()
	if !ok {
		return fitBlock([]string{"", "  (no data yet)"}, w, h)
	}
	rows := h - 1
	labels := p.yLabels(lo, hi, rows)
	lw := 0
	for _, l := range labels {
		lw = max(lw, ansi.StringWidth(l))
	}
	cw := w - lw - 1
	if cw < 2 {
		return fitBlock(nil, w, h)
	}
	lines := area(lo, hi, cw, rows)
	out := make([]string, 0, h)
	for r := range rows {
		axis := "│"
		if labels[r] != "" {
			axis = "┤"
		}
		out = append(out, fitLine(padLeft(labels[r], lw)+axis+lines[r], w))
	}
	return append(out, fitLine(strings.Repeat(" ", lw)+"└"+p.xAxis(cw-1), w))
}

// yRange is the value range to draw, widened when all values are equal.
func (p plot) yRange() (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, y := range p.ys {
		if finite(y) {
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
	}
	if lo > hi {
		return 0, 0, false
	}
	if p.yMin < p.yMax {
		lo, hi = p.yMin, p.yMax
	}
	if lo == hi {
		d := math.Abs(lo) * 0.05
		if d == 0 {
			d = 0.5
		}
		lo, hi = lo-d, hi+d
	}
	return lo, hi, true
}

// yLabels puts the maximum on the top row, the minimum on the bottom row and
// the midpoint on the middle row when there are at least 5 rows.
func (p plot) yLabels(lo, hi float64, rows int) []string {
	f := p.yFmt
	if f == nil {
		f = func(v float64) string { return sig3Any(v) }
	}
	l := make([]string, rows)
	l[0] = f(hi)
	if rows > 1 {
		l[rows-1] = f(lo)
	}
	if rows >= 5 {
		l[(rows-1)/2] = f(hi - (hi-lo)*float64((rows-1)/2)/float64(rows-1))
	}
	return l
}

// xAxis is the bottom line: the first label at the left, the last at the
// right, filled with the axis rule.
func (p plot) xAxis(w int) string {
	lo, hi := p.xLo, p.xHi
	gap := w - ansi.StringWidth(lo) - ansi.StringWidth(hi)
	if gap < 1 {
		return strings.Repeat("─", max(0, w))
	}
	return lo + strings.Repeat("─", gap) + hi
}

// rasterize maps the series to a pw x ph pixel grid (row 0 at the top).
// With more points than pixel columns, each column shows the mean of its
// bucket. Consecutive points are joined: every column between them gets the
// interpolated row, and a vertical run links it to the previous column, so
// the curve is continuous.
func rasterize(ys []float64, lo, hi float64, pw, ph int) [][]bool {
	grid := make([][]bool, ph)
	for i := range grid {
		grid[i] = make([]bool, pw)
	}
	row := func(v float64) int {
		y := int(math.Round((hi - v) / (hi - lo) * float64(ph-1)))
		return min(max(y, 0), ph-1)
	}
	xs, vs := samplePoints(ys, pw)
	for i := range xs {
		y1 := row(vs[i])
		if i == 0 {
			grid[y1][xs[i]] = true
			continue
		}
		x0, y0 := xs[i-1], row(vs[i-1])
		prev := y0
		for x := x0 + 1; x <= xs[i]; x++ {
			y := y0 + int(math.Round(float64((y1-y0)*(x-x0))/float64(xs[i]-x0)))
			fillRun(grid, x, prev, y)
			grid[y][x] = true
			prev = y
		}
	}
	return grid
}

// fillRun lights column x strictly between rows from and to.
func fillRun(grid [][]bool, x, from, to int) {
	if from == to {
		return
	}
	step := 1
	if to < from {
		step = -1
	}
	for y := from + step; y != to; y += step {
		grid[y][x] = true
	}
}

// samplePoints places finite values on pixel columns: evenly spread when
// there are fewer points than columns, bucket means otherwise.
func samplePoints(ys []float64, pw int) (xs []int, vs []float64) {
	n := len(ys)
	if n <= pw {
		for i, y := range ys {
			if !finite(y) {
				continue
			}
			x := 0
			if n > 1 {
				x = int(math.Round(float64(i) * float64(pw-1) / float64(n-1)))
			}
			xs, vs = append(xs, x), append(vs, y)
		}
		return xs, vs
	}
	for x := range pw {
		a, b := x*n/pw, (x+1)*n/pw
		sum, k := 0.0, 0
		for _, y := range ys[a:b] {
			if finite(y) {
				sum, k = sum+y, k+1
			}
		}
		if k > 0 {
			xs, vs = append(xs, x), append(vs, sum/float64(k))
		}
	}
	return xs, vs
}

// cells encodes pixel row band r (4 pixel rows) as cw braille characters.
func cells(grid [][]bool, r, cw int) string {
	var b strings.Builder
	for c := range cw {
		ch := rune(0x2800)
		for dx := range 2 {
			for dy := range 4 {
				if grid[4*r+dy][2*c+dx] {
					ch |= brailleBit[dx][dy]
				}
			}
		}
		b.WriteRune(ch)
	}
	return b.String()
}

func padLeft(s string, w int) string {
	if n := w - ansi.StringWidth(s); n > 0 {
		return strings.Repeat(" ", n) + s
	}
	return s
}

// sig3Any formats any value with about three significant digits.
func sig3Any(v float64) string {
	a := math.Abs(v)
	prec := 3
	switch {
	case a >= 100 || a == 0:
		prec = 0
	case a >= 10:
		prec = 1
	case a >= 1:
		prec = 2
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
