package cuda

import (
	"fmt"
	"strings"
	"testing"

	"resnetlab/kernels"
)

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

// The gather kernels hold a window's taps in a 64-bit mask: an 8x8 kernel
// (64 taps) is taken, a 9x9 one is refused by name before any launch.
func TestConvShapeTapLimit(t *testing.T) {
	x := &kernels.Tensor{Shape: []int{1, 2, 12, 12}, DType: kernels.F32}
	for _, c := range []struct {
		k  int
		ok bool
	}{{8, true}, {9, false}} {
		w := &kernels.Tensor{Shape: []int{3, 2, c.k, c.k}, DType: kernels.F32}
		got := func() (msg string) {
			defer func() {
				if r := recover(); r != nil {
					msg = fmt.Sprint(r)
				}
			}()
			convShapeOf("Conv2dForward", x, w, kernels.ConvParams{Stride: 1, Pad: 1})
			return ""
		}()
		if c.ok && got != "" {
			t.Errorf("%dx%d kernel: %s", c.k, c.k, got)
		}
		if !c.ok && (!strings.Contains(got, "9x9 kernel") || !strings.Contains(got, "more than 64 taps")) {
			t.Errorf("%dx%d kernel: got %q, want a refusal naming the kernel and the limit", c.k, c.k, got)
		}
	}
}
