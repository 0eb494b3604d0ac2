package cpu

// usingAsm reports whether microKernel is the assembly kernel.
var usingAsm = false
