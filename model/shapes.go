package model

import "fmt"

// Bounds of a model configuration that input (a spec, checkpoint metadata,
// an imported file's shapes) may ask for. MaxWidth keeps a model within
// what a host can hold; the spec parser, checkpoint readers and import all
// use it.
const MaxWidth = 4096

// Validate reports a configuration NewResNet18 cannot build, naming the
// field and value.
func (c Config) Validate() error {
	switch {
	case c.Width < 1 || c.Width > MaxWidth:
		return fmt.Errorf("width %d, want 1..%d", c.Width, MaxWidth)
	case c.InChannels != 1 && c.InChannels != 3:
		return fmt.Errorf("in_channels %d, want 1 or 3", c.InChannels)
	case c.NumClasses < 1:
		return fmt.Errorf("num_classes %d, want >= 1", c.NumClasses)
	}
	return nil
}

// ShapeEntry is one state-dict key and its shape ([] for a counter).
type ShapeEntry struct {
	Name  string
	Shape []int
}

// StateShapes lists the state dict NewResNet18(cfg) has, in its order,
// without allocating the model: callers check a file's tensors against it
// before building anything.
func StateShapes(cfg Config) []ShapeEntry {
	w := cfg.Width
	out := []ShapeEntry{{"conv1.weight", []int{w, cfg.InChannels, 7, 7}}}
	out = append(out, bnShapes("bn1", w)...)
	in := w
	for stage := range 4 {
		o := w << stage
		for i := range 2 {
			p := fmt.Sprintf("layer%d.%d.", stage+1, i)
			out = append(out, ShapeEntry{p + "conv1.weight", []int{o, in, 3, 3}})
			out = append(out, bnShapes(p+"bn1", o)...)
			out = append(out, ShapeEntry{p + "conv2.weight", []int{o, o, 3, 3}})
			out = append(out, bnShapes(p+"bn2", o)...)
			if in != o {
				out = append(out, ShapeEntry{p + "downsample.0.weight", []int{o, in, 1, 1}})
				out = append(out, bnShapes(p+"downsample.1", o)...)
			}
			in = o
		}
	}
	return append(out, ShapeEntry{"fc.weight", []int{cfg.NumClasses, in}}, ShapeEntry{"fc.bias", []int{cfg.NumClasses}})
}

func bnShapes(prefix string, c int) []ShapeEntry {
	return []ShapeEntry{{prefix + ".weight", []int{c}}, {prefix + ".bias", []int{c}},
		{prefix + ".running_mean", []int{c}}, {prefix + ".running_var", []int{c}},
		{prefix + ".num_batches_tracked", []int{}}}
}
