// Package ckpt owns resnetlab's checkpoint files: the container (a
// versioned, checksummed, atomically written file of named tensors and JSON
// metadata; checkpoint.go describes the layout, read.go reads it back
// checking every field), what a save puts in it (state.go: the model, Adam's
// moments, the loss scaler, the LR schedule and the run's per-epoch history,
// history.go), the names of a directory's checkpoints (ref.go: epoch ends
// and mid-epoch saves), the bounds crafted metadata must respect before a
// model is built from it (bounds.go), the checks a checkpoint passes before a
// run resumes from it (resume.go: one save, a model of the run's shape and
// settings), the lock a run holds on its checkpoint directory (lock.go) and
// the numbered directories that keep a fresh run off another run's files
// (dirs.go: DIR-run2, DIR-run3, ...; a resume reads the newest).
//
// It sits beside model/torchfmt (the PyTorch formats): the runner saves and
// loads through it, and the front ends name checkpoints with its Ref.
//
// Imports: ckpt imports engine (the State a save holds), model, kernels,
// data (the data sets' class counts and names), spec (the bounds a spec
// allows), report (the per-epoch results) and fsutil (bounded reads, atomic
// writes); kernels/cpu in tests only. Never runner, tui or cmd.
package ckpt
