// Package cuda implements kernels.Backend on NVIDIA GPUs from a pure-Go
// binary (CGO_ENABLED=0): the CUDA driver API is loaded at run time from
// libcuda.so.1 through purego, and the kernels are PTX generated from
// src/*.cu by gen.sh and embedded in the binary.
//
// Imports: kernels/cuda imports kernels, purego and the standard library
// (kernels/cpu only in tests, as the reference).
package cuda
