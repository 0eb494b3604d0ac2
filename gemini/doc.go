// Package gemini is Gemini, ColossalAI's chunk-based heterogeneous memory
// manager (PatrickStar), as a engine.Trainer.
//
// Chunks. The model's parameters are packed, in order of first use
// (model.Params() order is forward order), into fixed-capacity flat chunks
// of one dtype: the conv and fc weights (fp16/bf16) in chunks of the model
// dtype, the batch-norm weights and biases (fp32 in this model) in fp32
// chunks managed exactly the same way. Each chunk has an optimizer chunk:
// this rank's shard of the fp32 master weights, exp_avg and exp_avg_sq.
//
// Sharding (ZeRO-3). With several ranks a sharded chunk persists only as
// this rank's 1/world shard; before an operator uses it the full payload
// is all-gathered into a device buffer and after the use it is dropped.
// Gradients are written into a per-chunk device buffer; when every tensor
// of the chunk is READY_FOR_REDUCE the chunk is reduce-scattered (Avg) into
// fp32 gradient shards next to the optimizer chunk. ShardParamFrac < 1
// keeps the first chunks replicated (all-reduced, like DDP).
//
// Tensor states. Every parameter is FREE, COMPUTE, HOLD, HOLD_AFTER_BWD or
// READY_FOR_REDUCE, with exactly the legal transitions of docs/design.md; an illegal
// one panics. The model hooks (model.SetHooks) drive them around every
// conv, bn and fc.
//
// Heterogeneous memory. Chunk parts live on the device (the rank's
// backend) or in host memory, a second backend (kernels/cpu) whose
// MemStats are the host accounting. Moves go through the device backend's
// kernels.AsyncMover (store.go): on a GPU a copy stream, so a move overlaps
// the compute kernels; an upload's first operator waits for it on the
// device, an offload's device copy stays allocated (and counted) until it
// has completed; on the CPU every move completes at once. Every move is a
// MoveEvent. A device budget is kept by evicting, before
// each operator, the chunks used farthest in the future (as traced during
// warm-up, which also records each operator's non-model memory) so the
// operator's traced peak fits (a step that still breaks the budget returns
// a *BudgetError; in the warm-up, whose peak does not depend on the budget,
// that peak is the smallest budget that fits); with MaxPrefetch the next chunks of the
// traced order are uploaded ahead as far as the budget allows
// (prefetch.go). On a GPU the host tier is the device's pinned memory
// (kernels.PinnedHost), so moves are DMA without staging copies.
// HybridAdam updates the optimizer chunks on the device with the device
// backend and those in host memory with the CPU backend in the same step;
// a host chunk is updated as soon as its gradient shard has arrived,
// during the rest of backward, into a second set of buffers that the step
// keeps only when the overflow vote says it counts (early.go); where the
// chunk's parameters rest in host memory the update also rounds the new
// weights into a spare host payload that the step swaps in. Moves and
// placement only copy values, and both backends' Adam do the same IEEE
// operations, so a budgeted run computes exactly what an unbudgeted one
// does, on the CPU and on the GPU.
//
// Collectives. Step, State and LoadState are collectives, and so is every
// Forward of Model() when chunks are sharded (evaluation must run on every
// rank). The collective sequence depends only on the model, never on
// memory decisions, so ranks cannot diverge.
//
// Imports. gemini may import comm, engine (the Trainer interface, the loss
// scaler, the checkpoint State), model and kernels; it opens no backend
// (the runner passes the device and host backends) and knows nothing of the
// runner or data.
package gemini
