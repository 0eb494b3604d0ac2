package cuda

import "testing"

// The tap window drops exactly the taps that only ever meet padding.
func TestConvWindow(t *testing.T) {
	for _, c := range []struct {
		s          convShape
		ok         bool
		r, sx, pad int32
	}{
		{convShape{N: 1, C: 1, H: 1, W: 1, K: 1, R: 3, S: 3, P: 1, Q: 1, Stride: 1, Pad: 1}, true, 1, 1, 0},
		{convShape{N: 1, C: 1, H: 2, W: 2, K: 1, R: 3, S: 3, P: 1, Q: 1, Stride: 2, Pad: 1}, true, 2, 2, 0},
		{convShape{N: 1, C: 1, H: 2, W: 2, K: 1, R: 3, S: 3, P: 2, Q: 2, Stride: 1, Pad: 1}, false, 3, 3, 1},
		{convShape{N: 1, C: 1, H: 4, W: 4, K: 1, R: 3, S: 3, P: 2, Q: 2, Stride: 2, Pad: 1}, false, 3, 3, 1},
		{convShape{N: 1, C: 1, H: 1, W: 5, K: 1, R: 3, S: 3, P: 1, Q: 5, Stride: 1, Pad: 1}, false, 3, 3, 1},
		{convShape{N: 1, C: 1, H: 2, W: 2, K: 1, R: 1, S: 1, P: 1, Q: 1, Stride: 2, Pad: 0}, false, 1, 1, 0},
	} {
		w, ok := c.s.window()
		if ok != c.ok || w.R != c.r || w.S != c.sx || w.Pad != c.pad || w.P != c.s.P || w.Q != c.s.Q {
			t.Errorf("%+v: window %+v, %v; want R=%d S=%d pad=%d, %v", c.s, w, ok, c.r, c.sx, c.pad, c.ok)
		}
	}
}
