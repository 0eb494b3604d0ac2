package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"resnetlab/ckpt"
	"resnetlab/data"
	"resnetlab/runner"
	"resnetlab/spec"
)

func (c *cli) cmdEval(ctx context.Context, args []string) int {
	fs := newFlags("eval")
	var opts runner.EvalOptions
	var specPath string
	fs.StringVar(&opts.CheckpointDir, "c", "", "")
	fs.StringVar(&opts.CheckpointDir, "checkpoint", "", "")
	fs.IntVar(&opts.Epoch, "e", 0, "")
	fs.IntVar(&opts.Epoch, "epoch", 0, "")
	fs.StringVar(&opts.Dataset, "dataset", "", "")
	fs.StringVar(&opts.DataDir, "data", "", "")
	fs.StringVar(&opts.Device, "device", "auto", "")
	fs.IntVar(&opts.BatchSize, "batch", 128, "")
	fs.StringVar(&specPath, "spec", "", "")
	pos, done, code := c.parseArgs(fs, evalUsage, args)
	if done {
		return code
	}
	if msg := checkEvalArgs(&opts, pos); msg != "" {
		return c.usageError("eval", msg)
	}
	if err := c.completeEval(&opts, specPath); err != nil {
		fmt.Fprintf(c.stderr, "resnetlab eval: %v\n", err)
		return exitFailed
	}
	acc, perClass, err := c.eval(ctx, opts)
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab eval: %v\n", err)
		return exitFailed
	}
	// The reference example's line, kept verbatim for scripts that grep it.
	fmt.Fprintf(c.stdout, "Accuracy of the model on the test images: %.2f %%\n", 100*acc)
	names := classNames(opts, len(perClass))
	for i, a := range perClass {
		fmt.Fprintf(c.stdout, "  %-12s %6.2f %%\n", names[i], 100*a)
	}
	model, _, _ := ckpt.Paths(opts.CheckpointDir, opts.Epoch)
	fmt.Fprintf(c.stdout, "scored %s (epoch %d) on %s\n", model, opts.Epoch, opts.Dataset)
	return exitOK
}

func checkEvalArgs(o *runner.EvalOptions, pos []string) string {
	switch {
	case len(pos) > 0:
		return fmt.Sprintf("unexpected argument %q", pos[0])
	case o.CheckpointDir == "":
		return "missing -c DIR (the checkpoint directory)"
	case o.Epoch < 0:
		return fmt.Sprintf("-e %d: want an epoch >= 1", o.Epoch)
	case o.BatchSize < 1:
		return fmt.Sprintf("--batch %d: want at least 1", o.BatchSize)
	case spec.CheckDevice(o.Device) != nil: // as run and bench refuse it
		return fmt.Sprintf("--device %q: %v", o.Device, spec.CheckDevice(o.Device))
	}
	if o.Dataset != "" {
		canon, err := data.Canonical(o.Dataset)
		if err != nil {
			return fmt.Sprintf("--dataset %q: want cifar10, fashion-mnist or synthetic", o.Dataset)
		}
		o.Dataset = canon
	}
	return ""
}

// completeEval fills in the spec, the epoch (the latest complete checkpoint)
// and the data set (the one the checkpoint names).
func (c *cli) completeEval(o *runner.EvalOptions, specPath string) error {
	if specPath != "" {
		sp, err := spec.Load(specPath)
		if err != nil {
			return err
		}
		o.Spec = sp
		if o.Dataset == "" {
			o.Dataset = sp.Dataset
		}
		if o.DataDir == "" {
			o.DataDir = sp.DataDir
		}
	}
	if o.Epoch == 0 {
		epochs, err := ckpt.List(o.CheckpointDir)
		if err != nil {
			return err
		}
		if len(epochs) == 0 {
			return fmt.Errorf("no complete checkpoint (model_E.pth, optimizer_E.pth, lr_scheduler_E.pth) in %s", o.CheckpointDir)
		}
		o.Epoch = epochs[len(epochs)-1]
	}
	if err := checkEvalEpoch(o.CheckpointDir, o.Epoch); err != nil {
		return err
	}
	model, _, _ := ckpt.Paths(o.CheckpointDir, o.Epoch)
	trained := trainedOn(model)
	if o.Dataset == "" {
		o.Dataset = trained
	} else if trained != "" && trained != o.Dataset {
		// Allowed (a transfer check), but easy to do by mistake with
		// --spec or --dataset: say so rather than print a bare low score.
		fmt.Fprintf(c.stderr, "resnetlab eval: note: %s was trained on %s; scoring it on %s\n", model, trained, o.Dataset)
	}
	return nil
}

// trainedOn is the data set the model file records it was trained on, by
// its canonical name; "" when it records none (an import without
// --dataset) or cannot be read (Eval names the problem).
func trainedOn(model string) string {
	_, meta, err := ckpt.ReadMeta(model)
	if err != nil {
		return ""
	}
	name, _ := ckpt.MetaString(meta, "dataset")
	if canon, err := data.Canonical(name); err == nil {
		return canon
	}
	return name
}

// checkEvalEpoch says which epochs dir holds when epoch's model is not
// there (eval reads only model_E.pth).
func checkEvalEpoch(dir string, epoch int) error {
	model, _, _ := ckpt.Paths(dir, epoch)
	if _, err := os.Stat(model); !errors.Is(err, fs.ErrNotExist) {
		return nil // present, or a problem the reader will name
	}
	have, err := ckpt.List(dir)
	switch {
	case err != nil:
		return fmt.Errorf("-e %d: %w", epoch, err)
	case len(have) == 0:
		return fmt.Errorf("-e %d: no %s, and %s holds no complete checkpoint", epoch, model, dir)
	}
	return fmt.Errorf("-e %d: no %s (epochs saved in %s: %s)", epoch, model, dir, joinInts(have))
}

// classNames labels the per-class accuracies.
func classNames(o runner.EvalOptions, n int) []string {
	var names []string
	switch o.Dataset {
	case "cifar10":
		names = data.CIFAR10Classes
	case "fashion-mnist":
		names = data.FashionMNISTClasses
	}
	if len(names) == n {
		return names
	}
	names = make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("class %d", i)
	}
	return names
}
