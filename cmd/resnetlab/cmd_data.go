package main

import (
	"context"
	"fmt"

	"resnetlab/data"
)

func (c *cli) cmdData(ctx context.Context, args []string) int {
	if len(args) == 0 {
		return c.usageError("data", "missing subcommand (want: data fetch NAME)")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.stdout, dataUsage)
		return exitOK
	case "fetch":
	default:
		return c.usageError("data", fmt.Sprintf("unknown subcommand %q (want: data fetch NAME)", args[0]))
	}
	fs := newFlags("data fetch")
	root := fs.String("root", "", "")
	pos, done, code := c.parseArgs(fs, dataUsage, args[1:])
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.usageError("data", fmt.Sprintf("fetch wants one data set name, got %d arguments", len(pos)))
	}
	name, err := data.Canonical(pos[0])
	if err != nil {
		return c.usageError("data", fmt.Sprintf("unknown data set %q (want cifar10 or fashion-mnist)", pos[0]))
	}
	named := *root != ""
	if !named {
		*root = data.Root()
	}
	logf := func(format string, args ...any) { fmt.Fprintf(c.stdout, format+"\n", args...) }
	if err := c.fetch(ctx, name, *root, named, logf); err != nil {
		fmt.Fprintf(c.stderr, "resnetlab data fetch %s: %v\n", name, err)
		return exitFailed
	}
	return exitOK
}
