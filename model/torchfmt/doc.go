// Package torchfmt reads and writes PyTorch state dicts in the two formats people
// exchange: safetensors and torch.save's zip archive (.pth/.pt), using only the Go
// standard library, so no Python is needed on the user's machine.
//
// Tensors are held in memory as float32 (F32, F16, BF16) or int64 (I64) values; the
// dtype records how they are stored on disk. Half-precision values are converted with
// round-to-nearest-even on write and exactly on read.
//
// Limits, by design: only state dicts (a dict of str -> tensor) of the four dtypes;
// torch.save archives must be uncompressed (as torch writes them) and little-endian;
// the legacy pre-1.6 torch.save format is refused; single tensors of 4 GiB or more are
// not written; views may hold at most 16 elements per file byte in total, so a
// crafted file cannot make the reader allocate without bound.
//
// Imports: torchfmt imports kernels (its half-precision conversions) and the
// standard library.
package torchfmt
