package report

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"strings"
)

// A scene is the figure as a list of shapes in pixel coordinates, drawn
// once and written as PNG (own rasteriser and bitmap font) or SVG.
type scene struct {
	width, height, scale int
	shapes               []shape
}

type shapeKind int

const (
	shapeFill shapeKind = iota
	shapeLine
	shapeMarker
	shapeText
)

type textAnchor int

const (
	anchorStart textAnchor = iota
	anchorMiddle
	anchorEnd
)

type markerShape int

const (
	markerSquare markerShape = iota
	markerDiamond
	markerTriangle
	markerPlus
	markerCross
	numMarkers
)

type shape struct {
	kind   shapeKind
	rect   image.Rectangle // fill; clip of a line
	pts    []image.Point   // line; pts[0] is a marker's centre or a text's corner
	c      color.RGBA
	width  int
	dashed bool
	marker markerShape
	text   string
	anchor textAnchor
}

func (sc *scene) fill(r image.Rectangle, c color.RGBA) {
	sc.shapes = append(sc.shapes, shape{kind: shapeFill, rect: r, c: c})
}

func (sc *scene) box(r image.Rectangle, c color.RGBA) {
	sc.fill(image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), c)
	sc.fill(image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), c)
	sc.fill(image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), c)
	sc.fill(image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), c)
}

func (sc *scene) polyline(pts []image.Point, c color.RGBA, width int, dashed bool, clip image.Rectangle) {
	sc.shapes = append(sc.shapes, shape{kind: shapeLine, pts: pts, c: c, width: width, dashed: dashed, rect: clip})
}

func (sc *scene) marker(p image.Point, m markerShape, c color.RGBA) {
	sc.shapes = append(sc.shapes, shape{kind: shapeMarker, pts: []image.Point{p}, marker: m, c: c})
}

// text puts s with its top at y, starting, centred or ending at x.
func (sc *scene) text(x, y int, s string, a textAnchor, c color.RGBA) {
	sc.shapes = append(sc.shapes, shape{kind: shapeText, pts: []image.Point{{x, y}}, text: s, anchor: a, c: c})
}

// markerRadius is the half-size of a marker in pixels.
func (sc *scene) markerRadius() int { return 3 * sc.scale }

func (sc *scene) writePNG(w io.Writer) error {
	img := image.NewRGBA(image.Rect(0, 0, sc.width, sc.height))
	draw.Draw(img, img.Rect, image.NewUniform(plotBackground), image.Point{}, draw.Src)
	for _, sh := range sc.shapes {
		switch sh.kind {
		case shapeFill:
			plotFill(img, sh.rect, sh.c)
		case shapeLine:
			clip := img.SubImage(sh.rect.Inset(-1)).(*image.RGBA)
			pen := &plotPen{img: clip, c: sh.c, size: sh.width, dashed: sh.dashed}
			for i := 1; i < len(sh.pts); i++ {
				pen.line(sh.pts[i-1], sh.pts[i])
			}
		case shapeMarker:
			rasterMarker(img, sh.pts[0], sh.marker, sc.markerRadius(), sh.c)
		case shapeText:
			p := sh.pts[0]
			tw := textWidth(strings.ToUpper(sh.text), sc.scale)
			switch sh.anchor {
			case anchorMiddle:
				p.X -= tw / 2
			case anchorEnd:
				p.X -= tw
			}
			drawText(img, p.X, p.Y, sh.text, sc.scale, sh.c)
		}
	}
	return png.Encode(w, img)
}

// rasterMarker fills the pixels of marker m of half-size r around p.
func rasterMarker(img *image.RGBA, p image.Point, m markerShape, r int, c color.RGBA) {
	t := max(1, r/2) // stroke half-width of plus and cross
	for dy := -r; dy <= r; dy++ {
		for dx := -r; dx <= r; dx++ {
			var in bool
			switch m {
			case markerSquare:
				in = true
			case markerDiamond:
				in = plotAbs(dx)+plotAbs(dy) <= r
			case markerTriangle:
				in = 2*plotAbs(dx) <= dy+r
			case markerPlus:
				in = plotAbs(dx) < t || plotAbs(dy) < t
			case markerCross:
				in = plotAbs(dx-dy) < t+1 || plotAbs(dx+dy) < t+1
			}
			if in && image.Pt(p.X+dx, p.Y+dy).In(img.Rect) {
				img.SetRGBA(p.X+dx, p.Y+dy, c)
			}
		}
	}
}

func svgColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func svgEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// writeSVG writes the scene as SVG 1.1: lines clipped to their panel,
// text in a monospace font the size of the bitmap font's.
func (sc *scene) writeSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"+
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "+
		"font-family=\"monospace\" font-size=\"%d\">\n", sc.width, sc.height, sc.width, sc.height, (glyphH+2)*sc.scale)
	clips := map[image.Rectangle]string{}
	for _, sh := range sc.shapes {
		if sh.kind == shapeLine {
			if _, ok := clips[sh.rect]; !ok {
				id := fmt.Sprintf("clip%d", len(clips))
				clips[sh.rect] = id
				r := sh.rect.Inset(-1)
				fmt.Fprintf(bw, "<clipPath id=\"%s\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/></clipPath>\n",
					id, r.Min.X, r.Min.Y, r.Dx(), r.Dy())
			}
		}
	}
	for _, sh := range sc.shapes {
		sc.svgShape(bw, sh, clips)
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

func (sc *scene) svgShape(w io.Writer, sh shape, clips map[image.Rectangle]string) {
	col := svgColor(sh.c)
	switch sh.kind {
	case shapeFill:
		r := sh.rect
		fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", r.Min.X, r.Min.Y, r.Dx(), r.Dy(), col)
	case shapeLine:
		var pts []string
		for _, p := range sh.pts {
			pts = append(pts, fmt.Sprintf("%d,%d", p.X, p.Y))
		}
		dash := ""
		if sh.dashed {
			dash = fmt.Sprintf(" stroke-dasharray=\"%d %d\"", dashOn*sh.width, dashOff*sh.width)
		}
		fmt.Fprintf(w, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%d\"%s clip-path=\"url(#%s)\"/>\n",
			strings.Join(pts, " "), col, sh.width, dash, clips[sh.rect])
	case shapeMarker:
		p, r := sh.pts[0], sc.markerRadius()
		switch sh.marker {
		case markerSquare:
			fmt.Fprintf(w, "<rect class=\"marker\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", p.X-r, p.Y-r, 2*r+1, 2*r+1, col)
		case markerDiamond:
			fmt.Fprintf(w, "<polygon class=\"marker\" points=\"%d,%d %d,%d %d,%d %d,%d\" fill=\"%s\"/>\n", p.X, p.Y-r, p.X+r, p.Y, p.X, p.Y+r, p.X-r, p.Y, col)
		case markerTriangle:
			fmt.Fprintf(w, "<polygon class=\"marker\" points=\"%d,%d %d,%d %d,%d\" fill=\"%s\"/>\n", p.X, p.Y-r, p.X+r, p.Y+r, p.X-r, p.Y+r, col)
		case markerPlus:
			fmt.Fprintf(w, "<path class=\"marker\" d=\"M%d %dH%dM%d %dV%d\" stroke=\"%s\" stroke-width=\"%d\"/>\n", p.X-r, p.Y, p.X+r, p.X, p.Y-r, p.Y+r, col, r)
		case markerCross:
			fmt.Fprintf(w, "<path class=\"marker\" d=\"M%d %dL%d %dM%d %dL%d %d\" stroke=\"%s\" stroke-width=\"%d\"/>\n", p.X-r, p.Y-r, p.X+r, p.Y+r, p.X-r, p.Y+r, p.X+r, p.Y-r, col, r)
		}
	case shapeText:
		anchor := [...]string{"start", "middle", "end"}[sh.anchor]
		p := sh.pts[0]
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\" text-anchor=\"%s\" fill=\"%s\">%s</text>\n", p.X, p.Y+glyphH*sc.scale, anchor, col, svgEscape(sh.text))
	}
}
