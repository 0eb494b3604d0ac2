package main

import (
	"context"
	"fmt"
	"strings"

	"resnetlab/runner"
)

const benchUsage = `Usage: resnetlab bench [--device NAME] [--width W] [--batch N] [--steps S] [--warmup K] [--precision LIST] [--plugin NAME]

Times full training steps of ResNet-18 (forward, loss, backward, gradient
handling, Adam) on one rank with a fixed batch already on the device, and
prints the mean step time and images/s per precision. Runs report the
throughput with the input pipeline included.

Flags:
  --device NAME      auto (GPUs when present, else CPU), cpu or cuda (default auto)
  --width W          channels of the first stage (default 64: ResNet-18)
  --batch N          images per step (default 100)
  --steps S          timed steps (default 50)
  --warmup K         untimed steps first (default 5)
  --precision LIST   comma-separated precisions (default fp32,fp16)
  --plugin NAME      torch_ddp or low_level_zero (default torch_ddp)

Examples:
  resnetlab bench --device cuda --steps 200
  resnetlab bench --device cpu --width 16 --steps 10
`

func (c *cli) cmdBench(ctx context.Context, args []string) int {
	fs := newFlags("bench")
	o := runner.BenchOptions{}
	var precisions string
	fs.StringVar(&o.Device, "device", "auto", "")
	fs.IntVar(&o.Width, "width", 64, "")
	fs.IntVar(&o.Batch, "batch", 100, "")
	fs.IntVar(&o.Steps, "steps", 50, "")
	fs.IntVar(&o.Warmup, "warmup", 5, "")
	fs.StringVar(&precisions, "precision", "fp32,fp16", "")
	fs.StringVar(&o.Plugin, "plugin", "torch_ddp", "")
	pos, done, code := c.parseArgs(fs, benchUsage, args)
	if done {
		return code
	}
	if len(pos) > 0 {
		return c.usageError("bench", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	if o.Width < 1 || o.Batch < 1 || o.Steps < 1 || o.Warmup < 0 {
		return c.usageError("bench", "width, batch and steps must be >= 1, warmup >= 0")
	}
	o.Precisions = strings.Split(precisions, ",")
	res, err := runner.Bench(ctx, o)
	for _, r := range res {
		fmt.Fprintf(c.stdout, "%-14s %-5s %-28s %8.2f ms/step %9.0f images/s  peak %s\n",
			r.Plugin, r.Precision, r.Device, r.StepMS, r.ImagesPerSec, runner.FormatSize(r.PeakBytes))
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab bench: %v\n", err)
		return exitFailed
	}
	return exitOK
}
