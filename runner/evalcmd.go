package runner

import (
	"context"
	"fmt"
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
	if opts.Epoch < 1 {
		return 0, nil, fmt.Errorf("eval: epoch %d, want >= 1", opts.Epoch)
	}
	path, op, sp := ckpt.Paths(opts.CheckpointDir, opts.Epoch)
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
	if err := ckpt.CheckSameSave(opts.CheckpointDir, ckpt.Ref{Epoch: opts.Epoch}, path, []string{op, sp}, true); err != nil {
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
