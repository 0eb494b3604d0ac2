package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"resnetlab/ckpt"
	"resnetlab/spec"

	"resnetlab/data"
	"resnetlab/device"
	"resnetlab/kernels"
	"resnetlab/model"
)

// Eval measures the test accuracy of a saved model: overall and per class.
// The model's shape (width, input channels, classes) and data set come
// from the checkpoint's metadata unless opts override them.
func Eval(ctx context.Context, opts EvalOptions) (acc float64, perClass []float64, err error) {
	if opts.Epoch < 1 || opts.Step < 0 {
		return 0, nil, fmt.Errorf("eval: checkpoint %s, want an epoch >= 1 (and a step >= 0)", opts.Ref())
	}
	path, op, sp := opts.Ref().Paths(opts.CheckpointDir)
	meta, ts, err := ckpt.ReadFile(path, "model")
	if err != nil {
		return 0, nil, err
	}
	cfg, dataset, err := evalModelConfig(path, meta, opts)
	if err != nil {
		return 0, nil, err
	}
	if err := ckpt.CheckStateShapes(cfg, ckpt.StateDict(ts)); err != nil {
		return 0, nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := ckpt.CheckSameSave(opts.CheckpointDir, opts.Ref(), path, []string{op, sp}, true); err != nil {
		return 0, nil, err
	}
	if dataset == "" {
		return 0, nil, fmt.Errorf("%s records no dataset (imported from a file without resnetlab metadata); "+
			"give eval --dataset NAME, or import again with --dataset", path)
	}
	s := opts.Spec
	if s == nil {
		s = spec.Defaults(path, func(string) string { return "" })
		s.Dataset, s.InChannels = dataset, cfg.InChannels
		s.DataDir = data.Root()
		if v, err := ckpt.MetaInt(meta, "synthetic_test"); err == nil {
			s.Synthetic.Test = v
		}
		if v, err := ckpt.MetaInt(meta, "synthetic_seed"); err == nil {
			s.Synthetic.Seed = int64(v)
		}
		if dataset == "synthetic" && s.Synthetic.Test < 1 {
			return 0, nil, fmt.Errorf("%s records no synthetic_test and synthetic_seed (the synthetic test set); "+
				"import again with --synthetic-test N --synthetic-seed S, or give eval --spec", path)
		}
	}
	if opts.DataDir != "" {
		s.SetDataDir(opts.DataDir) // named by the user: search only there
	}
	s.Dataset = dataset
	_, test, err := loadData(s)
	if err != nil {
		return 0, nil, err
	}
	if test.C != cfg.InChannels {
		return 0, nil, fmt.Errorf("%s takes %d-channel images (in_channels %d), but %s has %d channels "+
			"(want eval --dataset of the data it was trained on)", path, cfg.InChannels, cfg.InChannels, dataset, test.C)
	}
	where := opts.Device
	if where == "" {
		where = "auto"
	}
	plan, err := device.PlanFor(where, 1, true)
	if err != nil {
		return 0, nil, err
	}
	be, err := plan.Open(0, 1)
	if err != nil {
		return 0, nil, err
	}
	defer device.Close(be)
	m := model.NewResNet18(be, cfg)
	defer m.Free()
	if err := m.LoadStateDict(ckpt.StateDict(ts)); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	var dev *deviceSet // nil: batches from the host
	if s.DeviceBatches {
		dev, _ = openDeviceSet(be, test)
		defer dev.free()
	}
	acc, perClass = evaluateModel(m, be, test, dev, kernels.F32, opts.BatchSize, nil)
	return acc, perClass, ctx.Err()
}

// evalModelConfig reads the model's shape from checkpoint metadata.
func evalModelConfig(path string, meta map[string]any, opts EvalOptions) (model.Config, string, error) {
	cfg, err := ckpt.CheckModelMeta(path, meta)
	if err != nil {
		return cfg, "", err
	}
	if opts.Spec != nil && opts.Spec.Width != cfg.Width {
		return cfg, "", fmt.Errorf("%s: the model has width %d, the spec says %d", path, cfg.Width, opts.Spec.Width)
	}
	dataset := opts.Dataset
	if dataset == "" {
		dataset, _ = ckpt.MetaString(meta, "dataset")
	}
	return cfg, dataset, nil
}

// ResolveCheckpoint is the checkpoint of dir that eval and export read for
// -e ref, and its model file: ref itself, or for a zero ref the latest
// complete end-of-epoch checkpoint (mid-epoch saves are read only when
// named, E@S). Only the model file need exist. Each error is one line
// naming the file or dir and the checkpoints dir holds.
func ResolveCheckpoint(dir string, ref ckpt.Ref) (ckpt.Ref, string, error) {
	if ref.Epoch < 0 || ref.Step < 0 || ref.Epoch == 0 && ref.Step != 0 {
		return ref, "", fmt.Errorf("-e %s: want an epoch E or E@S (a checkpoint of %s)", ref, dir)
	}
	if ref.IsZero() {
		refs, err := ckpt.ListRefs(dir)
		if err != nil {
			return ref, "", err
		}
		for _, r := range refs {
			if r.Step == 0 {
				ref = r // refs are in training order: the last is the latest
			}
		}
		if ref.IsZero() {
			msg := fmt.Sprintf("no complete checkpoint (model_E.pth, optimizer_E.pth, lr_scheduler_E.pth) in %s", dir)
			if len(refs) > 0 {
				msg += fmt.Sprintf(", only mid-epoch ones: %s (name one with -e E@S)", ckpt.JoinRefs(refs))
			}
			return ref, "", errors.New(msg)
		}
	}
	model, _, _ := ref.Paths(dir)
	if _, err := os.Stat(model); !errors.Is(err, fs.ErrNotExist) {
		return ref, model, nil // present, or a problem the reader will name
	}
	have, err := ckpt.ListRefs(dir)
	switch {
	case err != nil:
		return ref, "", fmt.Errorf("-e %s: %w", ref, err)
	case len(have) == 0:
		return ref, "", fmt.Errorf("-e %s: no %s, and %s holds no complete checkpoint", ref, model, dir)
	}
	return ref, "", fmt.Errorf("-e %s: no %s (checkpoints saved in %s: %s)", ref, model, dir, ckpt.JoinRefs(have))
}
