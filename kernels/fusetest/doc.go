// Package fusetest checks a backend's fused ops against its own separate
// ops, bit for bit. Every backend runs the same checks: kernels/cpu in CI,
// kernels/cuda in its device tests.
//
// Imports: fusetest imports kernels and the standard library; only tests use it.
package fusetest
