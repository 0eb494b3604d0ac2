//go:build !amd64 || purego

package cpu

// usingAsm reports whether microKernel is the assembly kernel.
var usingAsm = false

// adamVec has no vector version here: adamGo does all elements.
func adamVec(a *adamArrays, c *adamConsts) (int, bool) { return 0, false }

// roundF16Vec has no vector version here: copyRound does all elements.
func roundF16Vec(dst, src []float32) int { return 0 }
