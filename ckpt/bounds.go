package ckpt

import (
	"fmt"
	"slices"
	"strings"

	"resnetlab/data"
	"resnetlab/kernels"
	"resnetlab/model"
	"resnetlab/spec"
)

// Checkpoint metadata is input: a file may be crafted. Every field that
// sizes something (the model, the synthetic test set, the training
// position) is checked against the bounds a spec may ask for before
// anything is built from it, and every tensor's shape against the model
// the metadata describes before a model is allocated.

// metaBound is the allowed range of one integer metadata key.
type metaBound struct {
	key      string
	min, max int
	required bool
}

var ckptMetaBounds = []metaBound{
	{"width", 1, model.MaxWidth, true},
	{"num_classes", 1, 1 << 20, true}, // then: one of the data sets' class counts
	{"epoch", 1, spec.MaxEpochs, false},
	{"steps_per_epoch", 0, spec.MaxImages, false},
	{"synthetic_test", 0, spec.MaxImages, false}, // 0: not recorded (an import)
}

// CheckModelMeta validates a model file's metadata and returns the model
// configuration it describes. Errors name the file, the key and the value.
func CheckModelMeta(path string, meta map[string]any) (model.Config, error) {
	cfg := model.Config{DType: kernels.F32}
	vals := map[string]int{}
	for _, b := range ckptMetaBounds {
		v, err := MetaInt(meta, b.key)
		if err != nil {
			if _, present := meta[b.key]; present || b.required {
				return cfg, fmt.Errorf("checkpoint %s: %w", path, err)
			}
			continue
		}
		if v < b.min || v > b.max {
			return cfg, fmt.Errorf("checkpoint %s: metadata %q = %d (want %d..%d)", path, b.key, v, b.min, b.max)
		}
		vals[b.key] = v
	}
	in, err := MetaInt(meta, "in_channels")
	if err != nil {
		return cfg, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if in != 1 && in != 3 {
		return cfg, fmt.Errorf("checkpoint %s: metadata \"in_channels\" = %d (want 1 or 3)", path, in)
	}
	if c := vals["num_classes"]; !slices.Contains(DatasetClassCounts(), c) {
		return cfg, fmt.Errorf("checkpoint %s: metadata \"num_classes\" = %d (want %s, the class count of a data set)",
			path, c, JoinInts(DatasetClassCounts()))
	}
	if err := checkStep(path, meta, vals); err != nil {
		return cfg, err
	}
	cfg.Width, cfg.InChannels, cfg.NumClasses = vals["width"], in, vals["num_classes"]
	return cfg, nil
}

// checkStep bounds "step" by "steps_per_epoch": 0 <= step <= steps_per_epoch.
func checkStep(path string, meta map[string]any, vals map[string]int) error {
	if _, ok := meta["step"]; !ok {
		return nil
	}
	step, err := MetaInt(meta, "step")
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	spe, ok := vals["steps_per_epoch"]
	if !ok {
		return fmt.Errorf("checkpoint %s: metadata has \"step\" = %d but no \"steps_per_epoch\"", path, step)
	}
	if step < 0 || step > spe {
		return fmt.Errorf("checkpoint %s: metadata \"step\" = %d (want 0..%d, the steps_per_epoch)", path, step, spe)
	}
	return nil
}

// DatasetClassCounts are the class counts of the data sets resnetlab knows.
func DatasetClassCounts() []int {
	cs := []int{len(data.CIFAR10Classes), len(data.FashionMNISTClasses), len(data.SyntheticClasses)}
	slices.Sort(cs)
	return slices.Compact(cs)
}

func JoinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " or ")
}

// CheckStateShapes compares sd with the state dict of a cfg model before
// the model is built: a key present with another shape is refused, and so
// is a file holding less than half the values the model would allocate (a
// crafted width, or an import whose conv1/fc imply a far larger model).
// Missing and unexpected keys of a file that passes are left to
// LoadStateDict, which lists them all.
func CheckStateShapes(cfg model.Config, sd []model.NamedTensor) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	have := make(map[string][]int, len(sd))
	held := int64(0)
	for _, nt := range sd {
		have[nt.Name] = nt.Shape
		held += int64(max(len(nt.Data), len(nt.Int64)))
	}
	needed := int64(0)
	for _, e := range model.StateShapes(cfg) {
		got, ok := have[e.Name]
		if ok && !slices.Equal(got, e.Shape) {
			return fmt.Errorf("key %q has shape %v, want %v for width %d, in_channels %d, num_classes %d",
				e.Name, got, e.Shape, cfg.Width, cfg.InChannels, cfg.NumClasses)
		}
		n := int64(1)
		for _, d := range e.Shape {
			n *= int64(d)
		}
		needed += n
	}
	if needed > 2*held {
		return fmt.Errorf("the file holds %d values, a model of width %d, in_channels %d, num_classes %d has %d",
			held, cfg.Width, cfg.InChannels, cfg.NumClasses, needed)
	}
	return nil
}

// ParamLens is the element count of each parameter of a cfg model, in
// state-dict order (BN running statistics and counters are buffers).
func ParamLens(cfg model.Config) []int {
	var lens []int
	for _, e := range model.StateShapes(cfg) {
		if strings.HasSuffix(e.Name, ".running_mean") || strings.HasSuffix(e.Name, ".running_var") ||
			strings.HasSuffix(e.Name, ".num_batches_tracked") {
			continue
		}
		n := 1
		for _, d := range e.Shape {
			n *= d
		}
		lens = append(lens, n)
	}
	return lens
}
