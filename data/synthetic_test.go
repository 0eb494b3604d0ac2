package data

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

func TestSyntheticDeterministic(t *testing.T) {
	a, at := Synthetic(300, 100, 7)
	b, bt := Synthetic(300, 100, 7)
	c, _ := Synthetic(300, 100, 8)
	if !bytes.Equal(a.Images, b.Images) || !bytes.Equal(a.Labels, b.Labels) || !bytes.Equal(at.Images, bt.Images) {
		t.Fatal("same seed gave different bytes")
	}
	if bytes.Equal(a.Images, c.Images) || bytes.Equal(a.Labels, c.Labels) {
		t.Fatal("seeds 7 and 8 gave the same bytes")
	}
	if bytes.Equal(a.Images[:100*3072], at.Images) {
		t.Fatal("train and test sets start with the same images")
	}
	// Sample i depends only on (seed, split, i, label), not on the set size
	// or the parallel split of the work.
	big, _ := Synthetic(5000, 0, 7)
	same := 0
	for i := 0; i < a.N; i++ {
		if big.Labels[i] == a.Labels[i] {
			same++
			if !bytes.Equal(big.Image(i), a.Image(i)) {
				t.Fatalf("sample %d (label %d) differs between set sizes 300 and 5000", i, a.Labels[i])
			}
		}
	}
	if same == 0 {
		t.Fatal("no sample with the same label in both sets: test did not check anything")
	}
	for _, ds := range []*Dataset{a, at} {
		if err := ds.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSyntheticBalanced(t *testing.T) {
	for _, n := range []int{0, 1, 10, 1003, 5000} {
		ds, _ := Synthetic(n, 0, 3)
		h := ds.Histogram()
		if len(h) != 10 || slices.Max(h)-slices.Min(h) > 1 || sum(h) != n {
			t.Fatalf("n=%d: histogram %v, want 10 classes within one of each other", n, h)
		}
	}
	// Labels must be shuffled, not 0,1,2,... in order.
	ds, _ := Synthetic(100, 0, 3)
	inOrder := 0
	for i, l := range ds.Labels {
		if int(l) == i%10 {
			inOrder++
		}
	}
	if inOrder > 40 {
		t.Fatalf("%d of 100 labels equal i%%10: not shuffled", inOrder)
	}
}

func sum(h []int) (s int) {
	for _, v := range h {
		s += v
	}
	return s
}

// TestSyntheticMatchesTemplates classifies samples by their best normalised
// correlation with each class template's luminance over all shifts (the
// hue rotation keeps luminance). Images that follow their labels are
// classified far above chance; a label/image mix-up would give ~10%.
func TestSyntheticMatchesTemplates(t *testing.T) {
	const seed, n = 11, 60
	g := newSynGen(synDefault, seed)
	ds := g.set(n, 0)
	windows := templateWindows(g)
	right := 0
	for i := 0; i < n; i++ {
		if matchClass(ds.Image(i), windows) == int(ds.Labels[i]) {
			right++
		}
	}
	if right < n*6/10 {
		t.Fatalf("template matching classified %d of %d samples right, want >= 60%%", right, n)
	}
	t.Logf("template matching: %d of %d right", right, n)
}

// templateWindows returns, per class, the normalised luminance of the
// template at every shift the generator uses.
func templateWindows(g *synGen) [10][][]float64 {
	var out [10][][]float64
	for k := range out {
		var lum [synCanvas * synCanvas]float64
		for c := 0; c < 3; c++ {
			for i, v := range g.tpl[k][c] {
				lum[i] += float64(v)
			}
		}
		for sy := synMaxShift - g.p.shift; sy <= synMaxShift+g.p.shift; sy++ {
			for sx := synMaxShift - g.p.shift; sx <= synMaxShift+g.p.shift; sx++ {
				w := make([]float64, Plane)
				for y := 0; y < Side; y++ {
					copy(w[y*Side:(y+1)*Side], lum[(y+sy)*synCanvas+sx:])
				}
				normalise(w)
				out[k] = append(out[k], w)
			}
		}
	}
	return out
}

// matchClass returns the class whose template window correlates best with img's luminance.
func matchClass(img []uint8, windows [10][][]float64) int {
	x := make([]float64, Plane)
	for c := 0; c < 3; c++ {
		for j := range x {
			x[j] += float64(img[c*Plane+j])
		}
	}
	normalise(x)
	best, bestK := math.Inf(-1), -1
	for k := range windows {
		for _, w := range windows[k] {
			dot := 0.0
			for j, v := range w {
				dot += v * x[j]
			}
			if dot > best {
				best, bestK = dot, k
			}
		}
	}
	return bestK
}

// normalise makes v zero-mean with unit norm.
func normalise(v []float64) {
	m, s := 0.0, 0.0
	for _, e := range v {
		m += e
	}
	m /= float64(len(v))
	for i := range v {
		v[i] -= m
		s += v[i] * v[i]
	}
	s = math.Sqrt(s) + 1e-12
	for i := range v {
		v[i] /= s
	}
}
