package data

import (
	"fmt"
	"os"
)

// Side is the height and width of every image the package hands out.
const Side = 32

// Plane is the number of pixels of one channel of one image.
const Plane = Side * Side

// Dataset is a labelled image set held as bytes: N images of C*32*32 bytes
// each, channel-major (C,H,W), and N labels in [0, len(Classes)).
type Dataset struct {
	Name    string
	Source  string // where it came from (a directory, or "generated"), for the run log
	Images  []uint8
	Labels  []uint8
	N, C    int
	Classes []string
}

// ImageLen is the number of bytes (and of floats after conversion) of one image.
func (d *Dataset) ImageLen() int { return d.C * Plane }

// Image returns image i as a view into d.Images.
func (d *Dataset) Image(i int) []uint8 {
	n := d.ImageLen()
	return d.Images[i*n : (i+1)*n : (i+1)*n]
}

// Histogram counts the samples of each class.
func (d *Dataset) Histogram() []int {
	h := make([]int, len(d.Classes))
	for _, l := range d.Labels {
		if int(l) < len(h) {
			h[l]++
		}
	}
	return h
}

// Validate checks that the sizes agree and every label is a class.
func (d *Dataset) Validate() error {
	if d.C != 1 && d.C != 3 {
		return fmt.Errorf("data set %q: %d channels, expected 1 or 3", d.Name, d.C)
	}
	if len(d.Images) != d.N*d.ImageLen() || len(d.Labels) != d.N {
		return fmt.Errorf("data set %q: %d image bytes and %d labels, expected %d and %d for N=%d C=%d",
			d.Name, len(d.Images), len(d.Labels), d.N*d.ImageLen(), d.N, d.N, d.C)
	}
	for i, l := range d.Labels {
		if int(l) >= len(d.Classes) {
			return fmt.Errorf("data set %q: label %d of sample %d out of range [0,%d)", d.Name, l, i, len(d.Classes))
		}
	}
	return nil
}

// Root is the data set root directory: $DATA, or "./data" when unset.
func Root() string {
	if r := os.Getenv("DATA"); r != "" {
		return r
	}
	return "./data"
}

// CIFAR10Classes are CIFAR-10's class names in label order.
var CIFAR10Classes = []string{"airplane", "automobile", "bird", "cat", "deer",
	"dog", "frog", "horse", "ship", "truck"}

// FashionMNISTClasses are Fashion-MNIST's class names in label order.
var FashionMNISTClasses = []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
	"Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}
