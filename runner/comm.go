package runner

import (
	"fmt"
	"resnetlab/spec"
	"strings"

	"resnetlab/comm"
	"resnetlab/kernels"
)

// The communicator kinds a run resolves the spec's comm key to.
const (
	commHost   = "host"        // CPU ranks: host collectives on the tensors themselves
	commStaged = "host-staged" // GPU ranks through host memory (comm = "host")
	commDevice = "device"      // GPU ranks: peer copies and reduce kernels (comm.DeviceComm)
	commNCCL   = "nccl"        // GPU ranks, one per GPU: NCCL behind a host agreement check
)

// planComm resolves the spec's comm key for this run's backends (a kind
// already set stays: tests pick one the spec could not).
func (j *job) planComm() (string, error) {
	if j.commKind != "" {
		return j.commKind, nil
	}
	if j.world != nil {
		return j.worldCommKind()
	}
	want := j.spec.Comm
	if j.plan.Kind == "cpu" {
		if spec.GPUOnlyComm(want) {
			why := "device = \"cpu\""
			if j.plan.Notice != "" { // why the CPU, without the cores line
				why, _, _ = strings.Cut(j.plan.Notice, "; ")
			}
			return "", j.commError(fmt.Sprintf("%q needs GPU ranks, but this run trains on the CPU (%s) (want \"auto\" or \"host\")", want, why))
		}
		return commHost, nil
	}
	switch want {
	case "host":
		return commStaged, nil
	case "nccl":
		seen := map[int]bool{}
		for _, d := range j.plan.Devices {
			if seen[d] {
				return "", j.commError(fmt.Sprintf("\"nccl\" needs one GPU per rank, but the run's %d ranks share %d GPU(s) "+
					"(NCCL refuses two ranks on one device; want comm = \"device\", or gpus <= %d)",
					len(j.plan.Devices), len(seen), len(seen)))
			}
			seen[d] = true
		}
		return commNCCL, nil
	}
	return commDevice, nil // "auto", "device"
}

func (j *job) commError(msg string) error {
	return j.spec.KeyError("comm", msg)
}

// startComm prepares what the ranks' communicators share: for NCCL, one
// communicator per rank from ncclCommInitAll (LoadNCCL sets
// NCCL_NVLS_ENABLE=0 first).
func (j *job) startComm() error {
	if j.result != nil {
		j.result.Comm = j.commKind
	}
	if j.commKind != commNCCL || j.world != nil { // across processes: NCCL starts on the rank's thread (worldNCCL)
		j.logf(LevelInfo, "%s", j.commLine(""))
		return nil
	}
	lib, err := comm.LoadNCCL()
	if err != nil {
		return err
	}
	if j.nccl, err = lib.CommInitAll(j.plan.Devices); err != nil {
		return err
	}
	v, _ := lib.Version()
	j.logf(LevelInfo, "%s", j.commLine(fmt.Sprintf(" %d from %s (ncclCommInitAll over GPUs %v, NCCL_NVLS_ENABLE=0)", v, lib.Path, j.plan.Devices)))
	return nil
}

// commLine says in the log which communicator the run uses.
func (j *job) commLine(detail string) string {
	n := j.cell.WorldSize
	switch j.commKind {
	case commHost:
		if j.world != nil {
			return fmt.Sprintf("comm: host over TCP (rank %d of %d processes, collectives through rank 0 in rank order)", j.world.Rank(), n)
		}
		return fmt.Sprintf("comm: host (%d CPU rank(s), collectives over host memory in rank order)", n)
	case commStaged:
		return fmt.Sprintf("comm: host-staged (comm = \"host\": %d GPU rank(s) download, sum on the host, upload; the slow path)", n)
	case commDevice:
		return fmt.Sprintf("comm: device (%d GPU rank(s) on GPUs %v: peer copies and sums by the GPU's kernels, rank order)", n, j.plan.Devices)
	}
	if j.world != nil {
		return fmt.Sprintf("comm: nccl across processes (rank %d of %d on local GPU %d: ncclCommInitRank, the unique id through the world's store, calls agreed through rank 0)",
			j.world.Rank(), n, j.plan.Devices[j.deviceRank(0)])
	}
	return "comm: nccl" + detail
}

// comm makes rank r's communicator for its backend's tensors.
func (j *job) comm(r int, be kernels.Backend) (comm.DeviceCommunicator, error) {
	c := j.rankComm(r)
	switch j.commKind {
	case commHost:
		return comm.NewHostTensorComm(c), nil
	case commStaged:
		return comm.NewStagedComm(be, c), nil
	case commDevice:
		return comm.NewDeviceComm(be, c)
	case commNCCL:
		if j.world != nil {
			nc, err := j.worldNCCL(be)
			if err != nil {
				return nil, err
			}
			j.nccl = []*comm.NCCLComm{nc}
		}
		tc, err := j.nccl[r].ForBackend(be)
		if err != nil {
			return nil, err
		}
		return comm.NewCheckedComm(tc, c)
	}
	return nil, fmt.Errorf("unknown communicator %q", j.commKind)
}

// closeComm releases rank r's communicator before its backend closes.
func (j *job) closeComm(r int, rs *rankState) {
	switch c := rs.comm.(type) {
	case *comm.DeviceComm:
		c.Free()
	case *comm.CheckedComm:
		if tc, ok := c.D.(*comm.NCCLTensorComm); ok {
			tc.Free()
		}
	}
	if r >= len(j.nccl) || j.nccl[r] == nil {
		return
	}
	// NCCL acts on the calling thread's context; after a failed run a peer
	// may never have joined the last collective, so do not wait for it.
	if b, ok := rs.be.(interface{ Bind() func() }); ok {
		defer b.Bind()()
	}
	if j.failed {
		_ = j.nccl[r].Abort()
	} else {
		_ = j.nccl[r].Destroy()
	}
}
