// Package comm is resnetlab's rank and communication layer: the
// Coordinator each rank gets (rank, world size, master, barrier, priority
// execution), Launch for one goroutine per rank, collectives over host
// buffers and tensors, the run-time NCCL binding, and the TCP store, rendezvous and
// collectives of a world of processes.
//
// # Tensor communicators
//
// The engines (package engine, and gemini) take a DeviceCommunicator (all-reduce, reduce-scatter,
// all-gather, broadcast, barrier on one backend's tensors):
//
//   - HostTensorComm: CPU ranks, the host collectives below on the tensors.
//   - DeviceComm: ranks of one process whose backend implements
//     kernels.Peer (CUDA, also CPU for tests), several per GPU allowed:
//     device copies between ranks and sums by the backend's kernels, in
//     rank order, ordered between ranks' streams by events (devcomm.go).
//   - NCCLTensorComm: NCCL on the rank's stream; in one process behind
//     CheckedComm, which stops peers of a failed rank from waiting forever.
//   - StagedComm: any backend through host memory (slow; kept to compare).
//
// # Reduction order (determinism)
//
// The in-process collectives split a buffer into world blocks; block r is
// reduced by rank r and then gathered by every rank (the two phases of a
// ring all-reduce: reduce-scatter, then all-gather). A ring would pass
// partial sums from neighbour to neighbour, so an element's summation order
// would depend on its block (block c summed starting at rank c+1). Here every
// rank can read its peers' memory, so the owner of a block sums it directly
// in rank order:
//
//	out[i] = (((x0[i] + x1[i]) + x2[i]) + ... + x(W-1)[i])   // Sum
//	out[i] = that sum / float32(W)                           // Avg
//
// for every element, whatever its block. Results are therefore bit-identical
// on every rank, bit-identical from run to run, and equal to a plain
// sequential loop over ranks. A run with W ranks differs from one rank only
// by fp32 rounding of that sum. DeviceComm sums in the same order; for Avg
// it multiplies by float32(1/W) (same bits when W is a power of two). NCCL
// (GPU) does not promise this order.
//
// # Race detector
//
// The package tests take about a second; under -race the whole package
// takes ~20 s on two cores, so within the test time budget run only the
// small stress, abort and DeviceComm tests under -race (~3 s):
//
//	go test -race -run 'Stress|Abort|DeviceComm' ./comm/
//
// # Multi-process runs
//
// EnvFromLaunch reads torchrun's or srun's variables (slurm.go) and the
// timeouts (RESNETLAB_RENDEZVOUS_TIMEOUT, RESNETLAB_PEER_TIMEOUT). Rank 0
// serves a Store (store.go, like torch's TCPStore: set, get, add, wait,
// check, each with a timeout) at MASTER_ADDR:MASTER_PORT. JoinWorld is the
// rendezvous on it (join.go): every rank's world size, rank and fingerprint
// (spec and binary) are checked before any collective, a rank that never
// arrives is named on every rank. The ProcComm it returns is the host
// Communicator across processes: a star around rank 0 that reduces with
// reduceInto in rank order, so a world of CPU processes gives the
// in-process Group's bits; a lost or failed rank ends every other rank's
// collective with an error naming it, and heartbeats through the store
// (heartbeat.go) end the world when a rank falls silent. Rank reports
// (report.go) carry each other rank's latest small record (the runner's
// memory accounting) to rank 0's store, from a goroutine of their own and
// bounded in size and rate. For NCCL,
// CommOfWorld has rank 0 call NCCL.GetUniqueID, hands the id to every
// process through the store (ShareBytes) and calls NCCL.CommInitRank.
//
// # Imports
//
// comm may import kernels (and kernels/cuda for the GPU tests) and the
// standard library; it knows nothing of models, engines or the runner.
package comm
