// Package testutil holds helpers shared by the tests of several packages:
// bitwise comparison of float32 slices, opening CUDA ranks (skipping
// without a GPU), and files that are not regular (a FIFO, a link to
// /dev/zero) with the check that a read refuses them at once. Only _test.go files import it. It may import kernels and
// kernels/cuda, nothing above them.
package testutil
