// Package engine is the data-parallel training step of the torch_ddp,
// torch_ddp_fp16 and low_level_zero plugins: DDP (every rank holds the
// whole model and optimizer, gradients all-reduced) and ZeRO-1/2 (the fp32
// master weights and Adam state sharded across ranks, gradients
// reduce-scattered), the dynamic loss scaler, the engine's checkpoint state
// (State, the same for every world size) and CUDA-graph capture of the
// step. Trainer is the interface the runner drives; gemini.Gemini
// implements it as well.
//
// # Gradient buckets during backward
//
// The Engine reduces a gradient bucket as soon as backward has made all of
// its gradients final (model hooks, reducer.go), like torch DDP's Reducer.
// CPU ranks run those collectives on a comm goroutine, overlapped with the
// rest of backward; device ranks call them inline from the hook, since
// their backend is bound to the rank's thread (grads.go). Either way the
// results equal reducing every bucket after backward bit for bit.
//
// # Imports
//
// engine may import comm, model and kernels (and kernels/cpu, kernels/cuda
// in tests); not the runner, gemini or data.
package engine
