// Package cpu is the reference implementation of kernels.Backend in Go. It is
// the backend every CUDA kernel is tested against and the engine that trains
// on machines without a GPU, so it is written to be exact and deterministic
// first and fast second:
//
//   - Every result is bit-identical across runs and independent of the number
//     of worker goroutines: work is split only along independent outputs, and
//     every reduction runs in a fixed order inside one goroutine.
//   - Tensors of DType F16/BF16 hold float32 values rounded to that type after
//     every op writes them (round-to-nearest-even), which makes this backend
//     the reference for mixed precision as well.
//
// Convolutions are implicit GEMMs (gemm.go, patches.go, conv.go): im2col is
// gathered straight into the packed panels of a blocked SGEMM whose 6x16
// micro-kernel is AVX2/FMA assembly where the CPU has it (pure Go
// otherwise, or with -tags purego). Kernel taps that only ever read
// padding are dropped, and dx of a stride-1 convolution is the forward
// convolution of dy with the flipped kernel.
//
// Imports: kernels/cpu imports kernels, golang.org/x/sys/cpu (AVX2/FMA detection)
// and the standard library.
package cpu
