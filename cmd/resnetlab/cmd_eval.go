package main

import (
	"context"
	"fmt"

	"resnetlab/ckpt"
	"resnetlab/data"
	"resnetlab/runner"
	"resnetlab/spec"
)

func (c *cli) cmdEval(ctx context.Context, args []string) int {
	fs := newFlags("eval")
	var opts runner.EvalOptions
	var specPath, epoch string
	fs.StringVar(&opts.CheckpointDir, "c", "", "")
	fs.StringVar(&opts.CheckpointDir, "checkpoint", "", "")
	fs.StringVar(&epoch, "e", "", "")
	fs.StringVar(&epoch, "epoch", "", "")
	fs.StringVar(&opts.Dataset, "dataset", "", "")
	fs.StringVar(&opts.DataDir, "data", "", "")
	fs.StringVar(&opts.Device, "device", "auto", "")
	fs.IntVar(&opts.BatchSize, "batch", 128, "")
	fs.StringVar(&specPath, "spec", "", "")
	pos, done, code := c.parseArgs(fs, evalUsage, args)
	if done {
		return code
	}
	if msg := checkEvalArgs(&opts, pos, epoch, flagGiven(fs, "e") || flagGiven(fs, "epoch")); msg != "" {
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
	model, _, _ := opts.Ref().Paths(opts.CheckpointDir)
	fmt.Fprintf(c.stdout, "scored %s (%s) on %s\n", model, opts.Ref().Describe(), opts.Dataset)
	return exitOK
}

// checkEvalArgs checks eval's arguments and sets o.Epoch and o.Step from
// -e's value epoch (given: typed on the command line).
func checkEvalArgs(o *runner.EvalOptions, pos []string, epoch string, given bool) string {
	switch {
	case len(pos) > 0:
		return fmt.Sprintf("unexpected argument %q", pos[0])
	case o.CheckpointDir == "":
		return "missing -c DIR (the checkpoint directory)"
	}
	if given {
		ref, msg := parseEpochFlag(epoch, o.CheckpointDir)
		if msg != "" {
			return msg
		}
		o.Epoch, o.Step = ref.Epoch, ref.Step
	}
	if o.BatchSize < 1 {
		return fmt.Sprintf("--batch %d: want at least 1", o.BatchSize)
	}
	if err := spec.CheckDevice(o.Device); err != nil { // as run and bench refuse it
		return fmt.Sprintf("--device %q: %v", o.Device, err)
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

// parseEpochFlag reads eval's and export's -e: E or E@S, as run --resume
// takes it. A bad value gives the usage message.
func parseEpochFlag(s, dir string) (ckpt.Ref, string) {
	ref, err := ckpt.ParseRef(s)
	if err != nil {
		return ref, fmt.Sprintf("-e %q: want an epoch E or E@S (a checkpoint of %s)", s, dir)
	}
	return ref, ""
}

// completeEval fills in the spec, the checkpoint (without -e the latest
// complete end-of-epoch one) and the data set (the one the checkpoint
// names).
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
	ref, model, err := runner.ResolveCheckpoint(o.CheckpointDir, o.Ref())
	if err != nil {
		return err
	}
	o.Epoch, o.Step = ref.Epoch, ref.Step
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
