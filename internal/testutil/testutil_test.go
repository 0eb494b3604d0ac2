package testutil

import (
	"math"
	"strings"
	"testing"
)

func TestDiffBits(t *testing.T) {
	nan := float32(math.NaN())
	if err := DiffBits("x", []float32{1, nan, 0}, []float32{1, nan, 0}); err != nil {
		t.Fatal(err)
	}
	negZero := float32(math.Copysign(0, -1))
	err := DiffBits("x", []float32{1, 2, negZero}, []float32{1, 2, 0})
	if err == nil || !strings.Contains(err.Error(), "element 2") {
		t.Fatalf("-0 vs 0: got %v, want a difference at element 2", err)
	}
	if err := DiffBits("x", []float32{1}, []float32{1, 2}); err == nil || !strings.Contains(err.Error(), "1 elements, want 2") {
		t.Fatalf("lengths: got %v", err)
	}
}
