package data

import (
	"os"
	"testing"
)

func BenchmarkSynthetic60k(b *testing.B) {
	for b.Loop() {
		Synthetic(50000, 10000, 1)
	}
}

func BenchmarkLoadFashionMNIST(b *testing.B) {
	if _, err := os.Stat(SystemFashionMNISTDir); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if _, _, err := LoadFashionMNIST(b.TempDir(), 3); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBatch100Augment(b *testing.B) {
	train, _ := Synthetic(1000, 0, 1)
	l := NewLoader(train, TrainOptions(100, 1, 0, 1))
	x := make([]float32, 100*3*Plane)
	y := make([]float32, 100)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l.Batch(0, i%l.Steps(0), x, y)
	}
}
