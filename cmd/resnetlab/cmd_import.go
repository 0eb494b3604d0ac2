package main

import (
	"context"
	"fmt"

	"resnetlab/data"
	"resnetlab/runner"
)

const importUsage = `Usage: resnetlab import FILE -o DIR [-e E] [--dataset NAME]
                        [--synthetic-test N --synthetic-seed S]

Reads a torchvision resnet18 state dict, as written by
torch.save(model.state_dict(), FILE) or safetensors.torch.save_file (the
format is recognised from the content), checks every key and shape, and
writes it as checkpoint E in DIR: model_E.pth, optimizer_E.pth (Adam
moments zero, step 0) and lr_scheduler_E.pth. 'resnetlab eval -c DIR -e E'
scores it and a run with checkpoint DIR and resume E trains on from it.
The width, input channels and classes come from the shapes of conv1.weight
and fc.weight; keys prefixed "module." (DistributedDataParallel) are accepted.

Flags:
  -o, --output DIR   checkpoint directory to write (required; created if missing)
  -e, --epoch E      epoch number to give the checkpoint (default 1; an
                     existing checkpoint of that epoch is not replaced)
  --dataset NAME     data set eval scores it on: cifar10, fashion-mnist or
                     synthetic (default: the one a resnetlab export records;
                     a plain torch.save records none, and eval then asks)
  --synthetic-test N, --synthetic-seed S
                     the synthetic test set's size and seed (default: what a
                     resnetlab export records)

Examples:
  resnetlab import resnet18.pth -o ./ckpt-torch --dataset fashion-mnist
  resnetlab import resnet18.safetensors -o ./ckpt-torch -e 80
`

func (c *cli) cmdImport(ctx context.Context, args []string) int {
	fs := newFlags("import")
	var dir, dataset string
	var epoch int
	var opts runner.ImportOptions
	fs.IntVar(&opts.SynTest, "synthetic-test", 0, "")
	fs.IntVar(&opts.SynSeed, "synthetic-seed", 0, "")
	fs.StringVar(&dir, "o", "", "")
	fs.StringVar(&dir, "output", "", "")
	fs.IntVar(&epoch, "e", 1, "")
	fs.IntVar(&epoch, "epoch", 1, "")
	fs.StringVar(&dataset, "dataset", "", "")
	pos, done, code := c.parseArgs(fs, importUsage, args)
	if done {
		return code
	}
	switch {
	case len(pos) == 0:
		return c.usageError("import", "missing FILE (the .pth or .safetensors state dict)")
	case len(pos) > 1:
		return c.usageError("import", fmt.Sprintf("unexpected argument %q (one FILE at a time)", pos[1]))
	case dir == "":
		return c.usageError("import", "missing -o DIR (the checkpoint directory to write)")
	case epoch < 1:
		return c.usageError("import", fmt.Sprintf("-e %d: want an epoch >= 1", epoch))
	case opts.SynTest < 0:
		return c.usageError("import", fmt.Sprintf("--synthetic-test %d: want an image count >= 1", opts.SynTest))
	}
	if dataset != "" {
		canon, err := data.Canonical(dataset)
		if err != nil {
			return c.usageError("import", fmt.Sprintf("--dataset %q: want cifar10, fashion-mnist or synthetic", dataset))
		}
		dataset = canon
	}
	opts.Dataset = dataset
	if err := runner.ImportModel(pos[0], dir, epoch, opts); err != nil {
		fmt.Fprintf(c.stderr, "resnetlab import: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(c.stdout, "imported %s as epoch %d in %s; score it with: resnetlab eval -c %s -e %d\n",
		pos[0], epoch, dir, dir, epoch)
	return exitOK
}
