// Package graphtest is a stand-in for CUDA graph capture on any backend,
// for tests on machines without a GPU. Recorder wraps a backend: between
// BeginCapture and EndCapture it records every op as a closure over its
// arguments instead of running it, and refuses host transfers and waits as
// the CUDA backend does; Graph.Launch runs the recorded closures. Like a
// CUDA graph, a replay therefore sees the tensors and scalars of the
// capture, so a caller that forgets to re-capture after they change gets
// different numbers, which is what the tests look for.
//
// Imports: graphtest imports kernels and the standard library; only tests use it.
package graphtest
