package engine

import (
	"fmt"
	"math"

	"resnetlab/kernels"
)

func closeIfCloser(be kernels.Backend) {
	if c, ok := be.(interface{ Close() }); ok {
		c.Close()
	}
}

// diffBits reports the first element whose bits differ.
func diffBits(what string, got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Errorf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}
