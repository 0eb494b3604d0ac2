package data

import (
	"math"
	"testing"
)

// naiveAugment is the textbook pipeline: build the 40x40 zero-padded
// image, cut the 32x32 window at (dy,dx), mirror it if flip, divide by 255.
func naiveAugment(img []uint8, c, dy, dx int, flip bool) []float32 {
	const P = Side + 2*Pad
	out := make([]float32, c*Plane)
	for ch := 0; ch < c; ch++ {
		var padded [P][P]float64
		for y := 0; y < Side; y++ {
			for x := 0; x < Side; x++ {
				padded[y+Pad][x+Pad] = float64(img[ch*Plane+y*Side+x])
			}
		}
		for y := 0; y < Side; y++ {
			for x := 0; x < Side; x++ {
				sx := x
				if flip {
					sx = Side - 1 - x
				}
				out[ch*Plane+y*Side+x] = float32(padded[y+dy][sx+dx] / 255)
			}
		}
	}
	return out
}

func TestAugmentMatchesNaive(t *testing.T) {
	r := rng{5}
	for _, c := range []int{1, 3} {
		img := make([]uint8, c*Plane)
		for i := range img {
			img[i] = uint8(r.next())
		}
		dst := make([]float32, c*Plane)
		for dy := 0; dy <= 2*Pad; dy++ {
			for dx := 0; dx <= 2*Pad; dx++ {
				for _, flip := range []bool{false, true} {
					for i := range dst {
						dst[i] = float32(math.NaN()) // every element must be written
					}
					Augment(dst, img, c, dy, dx, flip)
					want := naiveAugment(img, c, dy, dx, flip)
					for i := range want {
						if dst[i] != want[i] {
							t.Fatalf("c=%d dy=%d dx=%d flip=%v: element %d = %v, want %v", c, dy, dx, flip, i, dst[i], want[i])
						}
					}
				}
			}
		}
	}
}

func TestToFloat(t *testing.T) {
	img := make([]uint8, 256)
	for i := range img {
		img[i] = uint8(i)
	}
	dst := make([]float32, 256)
	ToFloat(dst, img)
	for i, v := range dst {
		if v != float32(float64(i)/255) {
			t.Fatalf("ToFloat(%d) = %v, want %v", i, v, float32(float64(i)/255))
		}
	}
}

func TestAugmentParamsDistribution(t *testing.T) {
	const n = 90000
	var dy, dx [2*Pad + 1]int
	flips := 0
	for i := 0; i < n; i++ {
		y, x, f := AugmentParams(3, 1, i)
		if y2, x2, f2 := AugmentParams(3, 1, i); y2 != y || x2 != x || f2 != f {
			t.Fatal("AugmentParams is not a function of its arguments")
		}
		dy[y]++
		dx[x]++
		if f {
			flips++
		}
	}
	// Each offset expects n/9 = 10000 with sd ~95: allow 5 sd.
	for v := range dy {
		if math.Abs(float64(dy[v])-n/9) > 500 || math.Abs(float64(dx[v])-n/9) > 500 {
			t.Fatalf("offset %d drawn %d (dy) / %d (dx) times, want ~%d", v, dy[v], dx[v], n/9)
		}
	}
	if math.Abs(float64(flips)-n/2) > 800 {
		t.Fatalf("%d flips in %d, want ~%d", flips, n, n/2)
	}
	// dy, dx and flip must be independent: the joint (dy==dx) rate is 1/9.
	same := 0
	for i := 0; i < n; i++ {
		y, x, _ := AugmentParams(3, 1, i)
		if y == x {
			same++
		}
	}
	if math.Abs(float64(same)-n/9) > 500 {
		t.Fatalf("dy==dx %d times, want ~%d", same, n/9)
	}
}

func TestAugmentParamsVaryWithInputs(t *testing.T) {
	base := func(seed uint64, epoch int) (changed int) {
		for i := 0; i < 1000; i++ {
			a, b, c := AugmentParams(1, 0, i)
			x, y, z := AugmentParams(seed, epoch, i)
			if a != x || b != y || c != z {
				changed++
			}
		}
		return changed
	}
	// Two independent draws agree with probability 1/162.
	if c := base(2, 0); c < 950 {
		t.Fatalf("another seed changed only %d of 1000 samples' parameters", c)
	}
	if c := base(1, 1); c < 950 {
		t.Fatalf("another epoch changed only %d of 1000 samples' parameters", c)
	}
}
