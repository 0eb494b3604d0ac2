package main

import (
	"context"
	"fmt"

	"resnetlab/ckpt"
	"resnetlab/runner"
)

const exportUsage = `Usage: resnetlab export -c DIR [-e E|E@S] [--format safetensors|pth] -o FILE

Writes the model of a checkpoint as a PyTorch state dict with torchvision's
resnet18 keys, shapes and dtypes (float32 tensors, int64 num_batches_tracked),
so that

  m = torchvision.models.resnet18(num_classes=10)
  m.load_state_dict(torch.load(FILE))                       # pth
  m.load_state_dict(safetensors.torch.load_file(FILE))      # safetensors

loads it with strict key checking. The file is written atomically, and
only as a new file: an existing FILE is refused, never replaced, and FILE's
directory must exist (nothing else is created).

Flags:
  -c, --checkpoint DIR   checkpoint directory (required)
  -e, --epoch E          the checkpoint of epoch E's end (optional; default:
                         the latest complete one in DIR)
  -e, --epoch E@S        ... or the mid-epoch one S steps into epoch E (the
                         c key's or Ctrl-C's), as run --resume takes it
  --format NAME          safetensors or pth (torch.save's zip format)
                         (default: from FILE's extension, .safetensors or
                         .pth/.pt/.bin; a format that contradicts .safetensors,
                         .pth or .pt is refused)
  -o, --output FILE      file to write (required; must not exist)

Examples:
  resnetlab export -c ./checkpoint/zero/torch_ddp-fp32-1 -e 80 -o resnet18.safetensors
  resnetlab export -c ./ckpt -o resnet18.pth
`

func (c *cli) cmdExport(ctx context.Context, args []string) int {
	fs := newFlags("export")
	var dir, format, out, epoch string
	fs.StringVar(&dir, "c", "", "")
	fs.StringVar(&dir, "checkpoint", "", "")
	fs.StringVar(&epoch, "e", "", "")
	fs.StringVar(&epoch, "epoch", "", "")
	fs.StringVar(&format, "format", "", "")
	fs.StringVar(&out, "o", "", "")
	fs.StringVar(&out, "output", "", "")
	pos, done, code := c.parseArgs(fs, exportUsage, args)
	if done {
		return code
	}
	switch {
	case len(pos) > 0:
		return c.usageError("export", fmt.Sprintf("unexpected argument %q", pos[0]))
	case dir == "":
		return c.usageError("export", "missing -c DIR (the checkpoint directory)")
	case out == "":
		return c.usageError("export", "missing -o FILE (the file to write)")
	}
	var ref ckpt.Ref // zero: the latest complete one
	if flagGiven(fs, "e") || flagGiven(fs, "epoch") {
		var msg string
		if ref, msg = parseEpochFlag(epoch, dir); msg != "" {
			return c.usageError("export", msg)
		}
	}
	format, err := runner.ExportFormat(format, out)
	if err != nil {
		return c.usageError("export", err.Error())
	}
	from, err := runner.ExportCheckpoint(dir, ref, format, out)
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab export: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(c.stdout, "wrote %s (%s, resnet18 state dict with torchvision's keys) from %s\n", out, format, from)
	return exitOK
}
