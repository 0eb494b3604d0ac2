//go:build !amd64 || purego

package cpu

// usingAsm reports whether microKernel is the assembly kernel.
var usingAsm = false

// adamVec has no vector version here: adamGo does all elements.
func adamVec(a *adamArrays, c *adamConsts) (int, bool) { return 0, false }
