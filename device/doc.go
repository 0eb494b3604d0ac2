// Package device decides where a run's ranks compute and opens their
// backends: the CPU backend, or one CUDA device per rank (ranks may share
// a GPU when the spec allows it), with the notice a user should read when
// the CPU is used instead of a GPU. It also finds how many GPUs the machine
// has and recognises a CUDA out-of-memory error, so that nothing above it
// needs the CUDA package.
//
// Imports: device imports kernels, kernels/cpu and kernels/cuda, and the
// standard library.
package device
