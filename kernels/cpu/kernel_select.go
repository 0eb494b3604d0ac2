//go:build !amd64 || purego

package cpu

// usingAsm reports whether microKernel is the assembly kernel.
var usingAsm = false
