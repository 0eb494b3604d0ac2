package tui

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// decodeBraille turns braille cells back into pixels using the dot
// numbering of the Unicode standard (dots 1-3 and 7 in the left column top
// to bottom, 4-6 and 8 in the right column), independent of brailleBit.
func decodeBraille(t *testing.T, rows []string) [][]bool {
	t.Helper()
	dots := []struct{ bit, x, y int }{
		{0x01, 0, 0}, {0x02, 0, 1}, {0x04, 0, 2}, {0x40, 0, 3},
		{0x08, 1, 0}, {0x10, 1, 1}, {0x20, 1, 2}, {0x80, 1, 3},
	}
	var grid [][]bool
	for _, row := range rows {
		rs := []rune(row)
		band := make([][]bool, 4)
		for i := range band {
			band[i] = make([]bool, 2*len(rs))
		}
		for c, r := range rs {
			if r < 0x2800 || r > 0x28FF {
				t.Fatalf("not a braille cell: %q", r)
			}
			for _, d := range dots {
				if int(r-0x2800)&d.bit != 0 {
					band[d.y][2*c+d.x] = true
				}
			}
		}
		grid = append(grid, band...)
	}
	return grid
}

func TestBrailleHandChecked(t *testing.T) {
	// 0 then 1 in one cell: left column bottom dot (7), right column dots
	// 1-3 of the rising run up to its top dot (4,5,6) = 0x40|0x08|0x10|0x20.
	g := rasterize([]float64{0, 1}, 0, 1, 2, 4)
	if got := cells(g, 0, 1); got != "\u2878" {
		t.Fatalf("got %q (U+%04X), want U+2878", got, []rune(got)[0])
	}
}

// TestRasterizeAgainstNaive checks random series against an independent
// float computation: every point's pixel is lit, every column between two
// points has a lit pixel between their rows, and nothing else is lit.
func TestRasterizeAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		pw, ph := 2+rng.IntN(40), 4*(1+rng.IntN(5))
		n := 1 + rng.IntN(pw)
		ys := make([]float64, n)
		for i := range ys {
			ys[i] = rng.NormFloat64()
		}
		lo, hi := minMax(ys)
		if lo == hi {
			hi = lo + 1
		}
		grid := decodeBraille(t, encode(rasterize(ys, lo, hi, pw, ph), pw, ph))
		allowed := make([][]bool, ph)
		for i := range allowed {
			allowed[i] = make([]bool, pw)
		}
		px := func(i int) (int, int) {
			x := 0
			if n > 1 {
				x = int(math.Floor(float64(i)*float64(pw-1)/float64(n-1) + 0.5))
			}
			return x, int(math.Floor((hi-ys[i])/(hi-lo)*float64(ph-1) + 0.5))
		}
		for i := range n {
			x, y := px(i)
			if !grid[y][x] {
				t.Fatalf("trial %d: point %d (%d,%d) not lit", trial, i, x, y)
			}
			allowed[y][x] = true
			if i == 0 {
				continue
			}
			x0, y0 := px(i - 1)
			for c := x0 + 1; c <= x; c++ {
				lit := false
				for r := min(y0, y); r <= max(y0, y); r++ {
					allowed[r][c] = true
					lit = lit || grid[r][c]
				}
				if !lit {
					t.Fatalf("trial %d: column %d between points %d and %d is empty", trial, c, i-1, i)
				}
			}
		}
		for y := range ph {
			for x := range pw {
				if grid[y][x] && !allowed[y][x] {
					t.Fatalf("trial %d: stray pixel (%d,%d)", trial, x, y)
				}
			}
		}
	}
}

// encode renders a grid whose width may be odd by padding one column.
func encode(g [][]bool, pw, ph int) []string {
	cw := (pw + 1) / 2
	for i := range g {
		for len(g[i]) < 2*cw {
			g[i] = append(g[i], false)
		}
	}
	rows := make([]string, ph/4)
	for r := range rows {
		rows[r] = cells(g, r, cw)
	}
	return rows
}

func minMax(ys []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, y := range ys {
		lo, hi = math.Min(lo, y), math.Max(hi, y)
	}
	return lo, hi
}

// With more points than columns each column shows its bucket's mean.
func TestRasterizeBucketsMeans(t *testing.T) {
	const pw, ph = 4, 8
	ys := []float64{0, 2, 4, 6, 7, 7, 1, 3} // bucket means 1, 5, 7, 2
	g := rasterize(ys, 0, 7, pw, ph)
	for x, mean := range []float64{1, 5, 7, 2} {
		want := int(math.Floor((7-mean)/7*(ph-1) + 0.5))
		if !g[want][x] {
			t.Errorf("column %d: row %d (mean %v) not lit", x, want, mean)
		}
	}
}

func TestPlotRenderShape(t *testing.T) {
	ys := []float64{3, math.NaN(), 2, 1.5, math.Inf(1), 1}
	for _, sz := range [][2]int{{8, 2}, {20, 5}, {41, 9}, {7, 3}, {100, 1}} {
		w, h := sz[0], sz[1]
		out := plot{ys: ys, xLo: "ep1", xHi: "ep4"}.render(w, h)
		if len(out) != h {
			t.Fatalf("%dx%d: %d lines", w, h, len(out))
		}
		for _, l := range out {
			if ansi.StringWidth(l) != w {
				t.Fatalf("%dx%d: line %q is %d wide", w, h, l, ansi.StringWidth(l))
			}
		}
	}
	out := plot{ys: ys, xLo: "ep1", xHi: "ep4"}.render(30, 6)
	if !strings.HasPrefix(strings.TrimSpace(out[0]), "3.00┤") || !strings.Contains(out[4], "1.00┤") {
		t.Errorf("y labels should be max at the top and min at the bottom:\n%s", strings.Join(out, "\n"))
	}
	if !strings.Contains(out[5], "└ep1") || !strings.HasSuffix(strings.TrimRight(out[5], " "), "ep4") {
		t.Errorf("x axis labels missing: %q", out[5])
	}
	if got := (plot{}).render(20, 3); !strings.Contains(strings.Join(got, ""), "no data") {
		t.Errorf("empty plot: %q", got)
	}
}
