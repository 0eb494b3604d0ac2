package model

import (
	"errors"
	"fmt"
	"slices"

	"resnetlab/kernels"
)

// stateEntry is one state-dict slot: a float tensor or a BN batch counter.
type stateEntry struct {
	name    string
	t       *kernels.Tensor
	counter *int64
}

// entries lists the state dict in torchvision's order: per module its
// weight, bias, running_mean, running_var, num_batches_tracked.
func (m *ResNet) entries() []stateEntry {
	var es []stateEntry
	for _, l := range m.layers {
		for _, p := range l.Params() {
			es = append(es, stateEntry{name: p.Name, t: p.W})
		}
		if bn, ok := l.(*BatchNorm2d); ok {
			for _, b := range bn.Buffers() {
				es = append(es, stateEntry{name: b.Name, t: b.T})
			}
			es = append(es, stateEntry{name: bn.name + ".num_batches_tracked", counter: &bn.NumBatchesTracked})
		}
	}
	return es
}

// StateDict copies the model to host memory with torchvision's keys, order
// and shapes (122 entries for resnet18, 20 of them num_batches_tracked).
func (m *ResNet) StateDict() []NamedTensor {
	es := m.entries()
	out := make([]NamedTensor, len(es))
	for i, e := range es {
		out[i] = NamedTensor{Name: e.name, Shape: []int{}}
		if e.counter != nil {
			out[i].Int64 = []int64{*e.counter}
			continue
		}
		out[i].Shape = slices.Clone(e.t.Shape)
		out[i].Data = make([]float32, e.t.Len())
		m.be.Download(e.t, out[i].Data)
	}
	return out
}

// LoadStateDict replaces the model's state. Nothing is changed unless every
// key is present exactly once with the right shape; otherwise the error
// lists every missing, unexpected or mis-shaped key.
func (m *ResNet) LoadStateDict(sd []NamedTensor) error {
	byName := make(map[string]*NamedTensor, len(sd))
	var errs []error
	for i := range sd {
		if _, dup := byName[sd[i].Name]; dup {
			errs = append(errs, fmt.Errorf("duplicate key %q", sd[i].Name))
		}
		byName[sd[i].Name] = &sd[i]
	}
	found := make(map[string]*NamedTensor, len(sd))
	es := m.entries()
	for _, e := range es {
		nt, ok := byName[e.name]
		if !ok {
			errs = append(errs, fmt.Errorf("missing key %q", e.name))
			continue
		}
		found[e.name] = nt
		delete(byName, e.name)
		if err := checkEntry(e, nt); err != nil {
			errs = append(errs, err)
		}
	}
	for _, nt := range sd {
		if _, extra := byName[nt.Name]; extra {
			errs = append(errs, fmt.Errorf("unexpected key %q (shape %v)", nt.Name, nt.Shape))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("model: load state dict: %w", errors.Join(errs...))
	}
	for _, e := range es {
		nt := found[e.name]
		if e.counter != nil {
			*e.counter = nt.Int64[0]
		} else {
			m.be.Upload(e.t, nt.Data)
		}
	}
	return nil
}

// checkEntry validates one entry's shape and payload against the model.
func checkEntry(e stateEntry, nt *NamedTensor) error {
	if e.counter != nil {
		if len(nt.Shape) != 0 || len(nt.Int64) != 1 {
			return fmt.Errorf("key %q: want an int64 scalar (shape [], 1 int64), got shape %v with %d int64 values",
				e.name, nt.Shape, len(nt.Int64))
		}
		return nil
	}
	if !slices.Equal(nt.Shape, e.t.Shape) {
		return fmt.Errorf("key %q: shape %v in state dict, model has %v", e.name, nt.Shape, e.t.Shape)
	}
	if len(nt.Data) != e.t.Len() {
		return fmt.Errorf("key %q: %d float values for shape %v, want %d", e.name, len(nt.Data), nt.Shape, e.t.Len())
	}
	return nil
}

// CountTrainBatch does the host-side bookkeeping of one training forward
// (every batch norm's num_batches_tracked) without running it: a replayed
// CUDA graph runs the forward's device ops but not its Go code.
func (m *ResNet) CountTrainBatch() {
	for _, l := range m.layers {
		if bn, ok := l.(*BatchNorm2d); ok {
			bn.NumBatchesTracked++
		}
	}
}
