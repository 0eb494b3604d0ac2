package report

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
)

func countColor(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == c {
				n++
			}
		}
	}
	return n
}

func plotRows(t *testing.T) []Row {
	p, err := ParsePeerLog("peer.log", strings.NewReader(peerSample))
	if err != nil {
		t.Fatal(err)
	}
	return Build(reportResults(), []*PeerLog{p}, true)
}

func TestReportPlotPNG(t *testing.T) {
	rows := plotRows(t)
	curves := plotCurves(rows)
	if len(curves) != 5 { // 4 runs + the peer; reference rows have no curve
		t.Fatalf("%d curves, want 5", len(curves))
	}
	for _, size := range []image.Point{{DefaultPlotWidth, DefaultPlotHeight}, {320, 240}} {
		var buf bytes.Buffer
		if err := PlotAccuracy(&buf, rows, size.X, size.Y); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("%v: not a PNG: %v", size, err)
		}
		if img.Bounds().Size() != size {
			t.Fatalf("size %v, want %v", img.Bounds().Size(), size)
		}
		for i := range curves {
			if n := countColor(img, plotColor(i)); n < 20 {
				t.Errorf("%v: curve %d (%s) has %d pixels of its colour", size, i, curves[i].Label, n)
			}
		}
		if n := countColor(img, plotColor(len(curves))); n != 0 {
			t.Errorf("%v: %d pixels of an unused curve colour", size, n)
		}
		if n := countColor(img, plotInk); n < 100 {
			t.Errorf("%v: only %d pixels of labels and axes", size, n)
		}
	}
}

// Each curve passes through its points: the pixel of a curve's last point
// has the curve's colour (the last curve drawn owns a shared pixel, so
// each curve is checked on a plot of its own and the others).
func TestReportPlotPointsWhereExpected(t *testing.T) {
	rows := plotCurves(plotRows(t))
	var buf bytes.Buffer
	if err := PlotAccuracy(&buf, rows, DefaultPlotWidth, DefaultPlotHeight); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	f := newPlotFrame(image.NewRGBA(img.Bounds()), rows)
	for i, r := range rows {
		last := r.Curve[len(r.Curve)-1]
		p := f.px(float64(last.Epoch), 100*last.TestAcc)
		got := color.RGBAModel.Convert(img.At(p.X, p.Y)).(color.RGBA)
		if got != plotColor(i) && !isCurveColor(got, i, len(rows)) {
			t.Errorf("%s: pixel %v at epoch %d, %.2f%% is %v, want a curve colour", r.Label, p, last.Epoch, 100*last.TestAcc, got)
		}
	}
	if f.y0 > 30 || f.y1 < 80 || f.x1 != 3 {
		t.Errorf("axes y %v..%v x ..%v do not cover the data (30%%..80%%, 3 epochs)", f.y0, f.y1, f.x1)
	}
}

// isCurveColor: a later curve may cover an earlier one's point.
func isCurveColor(c color.RGBA, from, n int) bool {
	for j := from; j < n; j++ {
		if c == plotColor(j) {
			return true
		}
	}
	return false
}

func TestReportPlotErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := PlotAccuracy(&buf, ReferenceRows(), 800, 600); err == nil || !strings.Contains(err.Error(), "nothing to draw") {
		t.Errorf("no curves: %v", err)
	}
	if err := PlotAccuracy(&buf, plotRows(t), 100, 100); err == nil || !strings.Contains(err.Error(), "100x100") {
		t.Errorf("tiny plot: %v", err)
	}
}

// The line rasteriser against the line equation: one pixel per column of
// a shallow line, within half a pixel of the exact line, both ends set.
func TestReportPlotLine(t *testing.T) {
	red := color.RGBA{255, 0, 0, 255}
	for _, seg := range [][2]image.Point{{{2, 3}, {40, 17}}, {{40, 17}, {2, 3}}, {{5, 30}, {45, 29}}} {
		img := image.NewRGBA(image.Rect(0, 0, 50, 50))
		(&plotPen{img: img, c: red, size: 1}).line(seg[0], seg[1])
		a, b := seg[0], seg[1]
		for x := min(a.X, b.X); x <= max(a.X, b.X); x++ {
			exact := float64(a.Y) + float64(b.Y-a.Y)*float64(x-a.X)/float64(b.X-a.X)
			var ys []int
			for y := 0; y < 50; y++ {
				if img.RGBAAt(x, y) == red {
					ys = append(ys, y)
				}
			}
			if len(ys) != 1 || float64(ys[0])-exact > 0.5 || exact-float64(ys[0]) > 0.5 {
				t.Fatalf("%v: column %d has pixels %v, exact y %.2f", seg, x, ys, exact)
			}
		}
		if img.RGBAAt(a.X, a.Y) != red || img.RGBAAt(b.X, b.Y) != red {
			t.Errorf("%v: an end is not drawn", seg)
		}
	}
}

func TestReportPlotText(t *testing.T) {
	for _, s := range []string{"EPOCH", "100", "peer: x_1"} {
		img := image.NewRGBA(image.Rect(0, 0, 200, 40))
		drawText(img, 3, 5, s, 2, plotInk)
		ink := image.Rectangle{}
		for y := 0; y < 40; y++ {
			for x := 0; x < 200; x++ {
				if img.RGBAAt(x, y) == plotInk {
					ink = ink.Union(image.Rect(x, y, x+1, y+1))
				}
			}
		}
		// Every glyph here touches its cell's left and right column except
		// the last one's right edge may not: the ink stays within the box.
		box := image.Rect(3, 5, 3+textWidth(s, 2), 5+glyphH*2)
		if !ink.In(box) || ink.Dx() < box.Dx()-4*2 || ink.Empty() {
			t.Errorf("%q: ink %v, text box %v", s, ink, box)
		}
	}
	if got := fitText("torch_ddp_fp16-fp16-4", textWidth("torch_ddp", 1), 1); textWidth(got, 1) > textWidth("torch_ddp", 1) || !strings.HasSuffix(got, "..") {
		t.Errorf("fitText gave %q", got)
	}
}

func TestReportNiceStep(t *testing.T) {
	for _, tc := range []struct {
		span float64
		max  int
		want float64
	}{{80, 10, 10}, {7, 10, 1}, {33, 10, 5}, {0, 10, 1}, {150, 8, 20}, {3, 0, 5}} {
		if got := niceStep(tc.span, tc.max); got != tc.want {
			t.Errorf("niceStep(%v, %d) = %v, want %v", tc.span, tc.max, got, tc.want)
		}
	}
}
