// Package runner turns a spec into trained runs: it schedules the grid's
// runs and plans where each run's ranks compute (grid.go), drives each
// run's lifecycle — data, model, plugin, the epoch loop, evaluation, pause,
// checkpoint-now, stop, resume (run.go, job.go, loop.go) — and writes what a
// run leaves behind: checkpoints (through package ckpt, which owns the
// container; checkpoint.go is the run's side of it) and result files (through
// report.WriteResult), exports and imports (interop.go). It also
// measures steps (bench.go) and scores saved models (evalcmd.go). The spec
// language and grid expansion are package spec; result files, reports and
// plots are package report.
//
// The front ends talk to it only through RunSpec's channels: Event values
// out (events.go), Command values in. Nothing here knows about terminals.
//
// Imports: runner imports the plugins (engine, gemini), comm, device (to
// open backends: never kernels/cpu or kernels/cuda directly), model,
// model/torchfmt, ckpt, data, fsutil, kernels, spec and report;
// never tui or cmd.
package runner
