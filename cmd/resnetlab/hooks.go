package main

import (
	"context"

	"resnetlab/data"
	"resnetlab/runner"
	"resnetlab/spec"
)

// tuiFunc runs the terminal UI until the user quits or ctx ends. It reads
// events until they are closed and sends commands on cmds.
type tuiFunc func(ctx context.Context, sp *spec.Spec, cells []spec.Cell,
	events <-chan runner.Event, cmds chan<- runner.Command) error

// startTUI is the terminal UI, nil while the tui package is not wired in:
// `run` then falls back to headless output. To wire it, add a file here
// (e.g. tui_enable.go) with
//
//	func init() { startTUI = func(ctx, spec, cells, events, cmds) error { ... tui.Run(...) } }
var startTUI tuiFunc

// fetchFunc downloads a data set into root, reporting progress through logf;
// named says the user gave root (--root): the data must then end up there.
type fetchFunc func(ctx context.Context, name, root string, named bool, logf func(format string, args ...any)) error

// fetchData downloads data sets (a variable so tests can fake it).
var fetchData fetchFunc = func(ctx context.Context, name, root string, named bool, logf func(string, ...any)) error {
	if named {
		return data.Fetch(ctx, name, root, logf, data.OnlyRoot())
	}
	return data.Fetch(ctx, name, root, logf)
}
