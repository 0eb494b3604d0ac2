// Package kernels defines the one compute-backend interface that every op of
// resnetlab runs through. kernels/cpu is the reference implementation in Go;
// kernels/cuda implements the same interface on NVIDIA GPUs. Every op of the
// CUDA backend is tested against the CPU backend.
//
// Conventions shared by all backends:
//   - Tensors are dense, contiguous, row-major; images are NCHW.
//   - Ops write their outputs (they never accumulate into them) unless the
//     doc comment says otherwise. Outputs never alias inputs unless allowed.
//   - Arithmetic is fp32; a tensor whose DType is F16 or BF16 stores values
//     rounded to that type (the CPU backend keeps them in float32 rounded to
//     the narrow type after every write, which makes it the reference for
//     mixed precision too).
//
// Imports: kernels imports only the standard library: it is the bottom layer.
package kernels
