// Package testutil holds helpers shared by the tests of several packages:
// bitwise comparison of float32 slices and opening CUDA ranks (skipping
// without a GPU). Only _test.go files import it. It may import kernels and
// kernels/cuda, nothing above them.
package testutil
