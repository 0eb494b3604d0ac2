// Package runner turns a spec into trained runs. RunSpec (run.go) checks
// once what every run needs and hands the runs to the grid (grid.go),
// which plans how many train at once and where, starts them, and routes
// every command to its run. Each run is a job (job.go: set-up, the result,
// tear-down) with one goroutine per rank (ranks.go) and its collectives
// (comm.go; dist.go when the ranks are processes: the other processes
// report their memory to rank 0 through rankreport.go, and every rank
// serves rank 0's commands at the same step through worldcontrol.go). A job trains in the
// epoch loop (loop.go: epochs, evaluation, memory events), one training
// step at a time (step.go), and between steps serves pause, resume,
// checkpoint-now, stop, quit and resume-from (control.go). The package writes
// what a run leaves behind: checkpoints (through package ckpt, which owns the
// container; checkpoint.go is the run's side of it: taking a save, resuming
// from one; options.go points each run at its directory, a new numbered one
// for a fresh run whose directory holds another run's files) and result files (through report.WriteResult), exports and
// imports (interop.go). It also measures steps (bench.go) and scores saved
// models (evalcmd.go). The spec language and grid expansion are package
// spec; result files, reports and plots are package report.
//
// The front ends talk to it only through RunSpec's channels: Event values
// out (events.go), Command values in. Nothing here knows about terminals.
//
// Imports: runner imports the plugins (engine, gemini), comm, device (to
// open backends: never kernels/cpu or kernels/cuda directly), model,
// model/torchfmt, ckpt, data, fsutil, kernels, spec and report;
// never tui or cmd.
package runner
