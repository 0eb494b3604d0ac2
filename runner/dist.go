package runner

import (
	"fmt"

	"resnetlab/comm"
	"resnetlab/kernels"
	"resnetlab/spec"
)

// A run whose world spans processes (RunOptions.World): torchrun, srun or
// `resnetlab launch` started one process per rank, and each runs the same
// spec. This process trains only its own rank; the collectives go over
// the world's ProcComm (the same rank-order sums as in one process, so the
// model is the same bit for bit). Rank 0 writes everything the run leaves
// behind (checkpoints, the result, the digest); the other ranks take part
// in every collective, gathers included, and write nothing.

// checkWorld refuses a grid a world of processes cannot train: it trains
// exactly one run, of the world's size.
func checkWorld(s *spec.Spec, cells []spec.Cell, w *comm.ProcComm) error {
	if w == nil {
		return nil
	}
	return CheckWorldGrid(s.File, cells, LauncherWorld(w.WorldSize()))
}

// World names a world of processes in the messages of CheckWorldGrid:
// what trains (e.g. "a launch") and how its size was set.
type World struct {
	Size    int
	Trains  string // "a run started by a launcher (WORLD_SIZE=2)"
	Started string // "the launcher started WORLD_SIZE=2 processes"
}

// LauncherWorld is a world of n processes that a launcher (torchrun,
// srun, resnetlab launch) started, as its ranks see it.
func LauncherWorld(n int) World {
	return World{Size: n, Trains: fmt.Sprintf("a run started by a launcher (WORLD_SIZE=%d)", n),
		Started: fmt.Sprintf("the launcher started WORLD_SIZE=%d processes", n)}
}

// CheckWorldGrid refuses, in one line naming the spec file, a grid that is
// not exactly one run of w.Size processes: the runner's check, and the same
// one resnetlab launch and each rank make before any rendezvous.
func CheckWorldGrid(file string, cells []spec.Cell, w World) error {
	if len(cells) != 1 {
		return fmt.Errorf("%s: %s trains one run, but the grid has %d (narrow plugin, precision and gpus to one run)",
			file, w.Trains, len(cells))
	}
	if c := cells[0]; c.WorldSize != w.Size {
		return fmt.Errorf("%s: run %s has gpus = %d, but %s (make them equal)", file, c.ID, c.WorldSize, w.Started)
	}
	return nil
}

// localRanks is how many ranks this process trains.
func (j *job) localRanks() int {
	if j.world != nil {
		return 1
	}
	return j.cell.WorldSize
}

// planRanks is how many ranks the device plan places on this host: the
// run's, or this host's processes (each opens device LOCAL_RANK).
func (j *job) planRanks() int {
	if j.world != nil {
		return max(j.world.LocalWorldSize(), j.world.LocalRank()+1)
	}
	return j.cell.WorldSize
}

// deviceRank is the plan's index of this process's i-th rank.
func (j *job) deviceRank(i int) int {
	if j.world != nil {
		return j.world.LocalRank() + i
	}
	return i
}

// globalRank is the world rank of this process's i-th rank.
func (j *job) globalRank(i int) int {
	if j.world != nil {
		return j.world.Rank() + i
	}
	return i
}

// records reports whether this process writes what the run leaves behind.
func (j *job) records() bool { return j.world == nil || j.world.Rank() == 0 }

// abortRanks unblocks the collectives of every rank after one failed; in a
// world of processes it tells the other processes why.
func (j *job) abortRanks(err error) {
	if j.world != nil {
		j.world.Abort(err)
		return
	}
	j.group.Abort(err)
}

// rankComm is the host communicator of this process's i-th rank.
func (j *job) rankComm(i int) comm.Communicator {
	if j.world != nil {
		return j.world
	}
	return j.group.Comm(i)
}

// worldCommKind resolves the spec's comm key for a world of processes: CPU
// ranks use the host collectives over TCP; GPU ranks NCCL ("auto",
// "nccl") or the host through ProcComm ("host"); "device" needs the ranks
// in one process.
func (j *job) worldCommKind() (string, error) {
	want := j.spec.Comm
	switch {
	case j.plan.Kind == "cpu" && spec.GPUOnlyComm(want):
		return "", j.commError(fmt.Sprintf("%q needs GPU ranks, but this run trains on the CPU (want \"auto\" or \"host\")", want))
	case j.plan.Kind == "cpu":
		return commHost, nil
	case want == "host":
		return commStaged, nil
	case want == "device":
		return "", j.commError("\"device\" copies between the ranks of one process, but a launcher started one process per rank (want \"auto\", \"nccl\" or \"host\")")
	}
	return commNCCL, nil
}

// worldNCCL joins this process's GPU to the world's NCCL communicator:
// rank 0 makes the unique id, the world's store hands it to every rank,
// and each calls ncclCommInitRank with its GPU's context current.
func (j *job) worldNCCL(be kernels.Backend) (*comm.NCCLComm, error) {
	lib, err := comm.LoadNCCL()
	if err != nil {
		return nil, err
	}
	if bb, ok := be.(interface{ Bind() func() }); ok {
		defer bb.Bind()()
	}
	return lib.CommOfWorld(j.world)
}
