package report

import (
	"bytes"
	"encoding/xml"
	"image"
	"image/color"
	"image/png"
	"io"
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

func decodePlot(t *testing.T, rows []Row, w, h int) image.Image {
	t.Helper()
	var buf bytes.Buffer
	if err := Plot(&buf, rows, "png", w, h); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if img.Bounds().Size() != image.Pt(w, h) {
		t.Fatalf("size %v, want %dx%d", img.Bounds().Size(), w, h)
	}
	return img
}

func countColorIn(img image.Image, r image.Rectangle, c color.RGBA) int {
	return countColor(img.(*image.RGBA).SubImage(r), c)
}

func TestReportPlotPNG(t *testing.T) {
	rows := plotRows(t)
	curves := plotCurves(rows)
	if len(curves) != 5 { // 4 runs + the peer; reference rows have no curve
		t.Fatalf("%d curves, want 5", len(curves))
	}
	for _, size := range []image.Point{{DefaultPlotWidth, DefaultPlotHeight}, {640, 480}} {
		img := decodePlot(t, rows, size.X, size.Y)
		l := newPlotLayout(size.X, size.Y, len(curves), false)
		for i := range curves {
			for name, area := range map[string]image.Rectangle{"accuracy": l.acc, "loss": l.loss} {
				if n := countColorIn(img, area.Inset(-2), plotColor(i)); n < 20 {
					t.Errorf("%v: %s curve %d (%s) has %d pixels of its colour", size, name, i, curves[i].Label, n)
				}
			}
			if got := color.RGBAModel.Convert(img.At(legendSwatch(l.legend, i, l.scale).X, legendSwatch(l.legend, i, l.scale).Y)); got != plotColor(i) {
				t.Errorf("%v: legend swatch %d is %v, want %v", size, i, got, plotColor(i))
			}
		}
		// One legend entry per run: the legend holds exactly the runs' colours.
		for i := range plotPalette {
			n := countColorIn(img, l.legend, plotColor(i))
			if (i < len(curves)) != (n > 0) {
				t.Errorf("%v: legend has %d pixels of colour %d, %d runs", size, n, i, len(curves))
			}
		}
		for i, r := range curves { // only torch_ddp-fp32-1 has a throughput
			if n := countColorIn(img, l.tput, plotColor(i)); (r.ImagesPerSec > 0) != (n > 50) {
				t.Errorf("%v: throughput bar of run %d (%.0f img/s) has %d pixels", size, i, r.ImagesPerSec, n)
			}
		}
		if n := countColor(img, plotInk); n < 100 {
			t.Errorf("%v: only %d pixels of labels and axes", size, n)
		}
	}
}

// Two runs with the same curve: the second is dashed with another marker,
// so the first one's colour still shows all along both curves.
func TestReportPlotIdenticalCurvesBothVisible(t *testing.T) {
	rows := plotCurves(plotRows(t))[:2]
	rows[1].Curve = rows[0].Curve
	img := decodePlot(t, rows, DefaultPlotWidth, DefaultPlotHeight)
	l := newPlotLayout(DefaultPlotWidth, DefaultPlotHeight, 2, false)
	sc := &scene{scale: l.scale}
	lo, hi := curveRange(rows, func(e EpochResult) float64 { return 100 * e.TestAcc })
	a := newAxes(sc, l.acc, rows, lo, hi, true)
	c := rows[0].Curve
	for k := 1; k < len(c); k++ { // each segment, both colours near it
		p, q := a.px(float64(c[k-1].Epoch), 100*c[k-1].TestAcc), a.px(float64(c[k].Epoch), 100*c[k].TestAcc)
		seg := image.Rectangle{p, q}.Canon().Inset(-3)
		for i := range rows {
			if n := countColorIn(img, seg, plotColor(i)); n < 10 {
				t.Errorf("segment %d: run %d has %d pixels of its colour", k, i, n)
			}
		}
	}
}

func TestReportPlotReferenceLine(t *testing.T) {
	rows := plotCurves(plotRows(t))[:1]
	rows[0].Dataset, rows[0].Plugin, rows[0].WorldSize = "cifar10", "gemini", 2
	l := newPlotLayout(DefaultPlotWidth, DefaultPlotHeight, 1, true)
	if n := countColorIn(decodePlot(t, rows, DefaultPlotWidth, DefaultPlotHeight), l.acc, plotRefColor); n < 50 {
		t.Errorf("cifar10: %d pixels of the reference line", n)
	}
	rows[0].Dataset = "fashion-mnist"
	if n := countColorIn(decodePlot(t, rows, DefaultPlotWidth, DefaultPlotHeight), l.acc, plotRefColor); n != 0 {
		t.Errorf("fashion-mnist: %d pixels of a reference line", n)
	}
}

func TestReportPlotSVG(t *testing.T) {
	rows := plotRows(t)
	curves := plotCurves(rows)
	var buf bytes.Buffer
	if err := Plot(&buf, rows, "svg", DefaultPlotWidth, DefaultPlotHeight); err != nil {
		t.Fatal(err)
	}
	texts := map[string]int{}
	polylines := 0
	dec := xml.NewDecoder(&buf)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "text":
				var s string
				if err := dec.DecodeElement(&s, &se); err != nil {
					t.Fatal(err)
				}
				texts[s]++
			case "polyline":
				polylines++
			}
		}
	}
	for _, r := range curves {
		if texts[r.Label] != 1 {
			t.Errorf("label %q appears %d times, want once (its legend entry)", r.Label, texts[r.Label])
		}
	}
	want := len(curves) // legend strokes
	for _, r := range curves {
		if len(r.Curve) > 1 {
			want += 2 // accuracy and loss
		}
	}
	if polylines != want {
		t.Errorf("%d polylines, want %d", polylines, want)
	}
}

func TestReportPlotErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := Plot(&buf, ReferenceRows(), "png", 800, 600); err == nil || !strings.Contains(err.Error(), "nothing to draw") {
		t.Errorf("no curves: %v", err)
	}
	if err := Plot(&buf, plotRows(t), "png", 100, 100); err == nil || !strings.Contains(err.Error(), "100x100") {
		t.Errorf("tiny plot: %v", err)
	}
	for path, want := range map[string]string{"a/b.png": "png", "x.SVG": "svg", "x.txt": "", "noext": ""} {
		got, err := PlotFormat(path)
		if got != want || (want == "") != (err != nil) || (err != nil && !strings.Contains(err.Error(), path)) {
			t.Errorf("PlotFormat(%q) = %q, %v", path, got, err)
		}
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
