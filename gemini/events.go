package gemini

import (
	"fmt"

	"resnetlab/kernels"
)

// Location is where a piece of a chunk lives.
type Location uint8

const (
	Nowhere Location = iota // not materialised (a sharded chunk's full payload between uses)
	Device                  // the rank's backend
	Host                    // host memory (the CPU backend Gemini keeps beside it)
)

func (l Location) String() string {
	switch l {
	case Nowhere:
		return "nowhere"
	case Device:
		return "device"
	case Host:
		return "host"
	}
	return fmt.Sprintf("Location(%d)", uint8(l))
}

// Part names what a MoveEvent moved.
type Part string

const (
	PartPayload Part = "payload" // the chunk's full fp16/bf16 (or fp32) parameters
	PartShard   Part = "shard"   // this rank's persistent shard of a sharded chunk
	PartGrad    Part = "grad"    // the chunk's gradients during backward
	PartOptim   Part = "optim"   // the fp32 master, exp_avg and exp_avg_sq shard
)

// MoveEvent reports one transfer of chunk data between device and host,
// when it is issued (an asynchronous move completes later).
type MoveEvent struct {
	Rank, Chunk int
	Part        Part
	From, To    Location
	Bytes       int64
	Prefetch    bool // an upload issued ahead of the operator that needs it
	// Clean: a payload left the device without a copy (Bytes 0), because
	// host memory still held the values it was uploaded from.
	Clean bool
	// InStep: issued inside Step, so counted in that step's MemStatsEvent
	// (H2DBytes, D2HBytes); false for a move outside the training steps
	// (an evaluation's forward passes fetch the chunks they need too).
	InStep bool
}

// StateChange reports one tensor's state transition.
type StateChange struct {
	Rank, Chunk int
	Tensor      string // parameter name, e.g. "layer1.0.conv1.weight"
	From, To    TensorState
}

// ChunkInfo is one chunk's placement and tensor states.
type ChunkInfo struct {
	ID      int
	DType   kernels.DType
	Elems   int   // capacity in elements (all ranks together)
	Used    int   // elements holding parameters
	Bytes   int64 // payload bytes of the full chunk
	Sharded bool
	Payload Location // full payload: Device, Host, or Nowhere (sharded, released)
	Shard   Location // this rank's shard (sharded chunks only, else Nowhere)
	Optim   Location // fp32 master and Adam moments
	States  [numStates]int
}

// OnDevice reports whether the chunk's parameters are on the device now
// (the full payload, or for a released sharded chunk its shard).
func (c ChunkInfo) OnDevice() bool {
	return c.ParamsOn() == Device
}

// ChunksEvent is every chunk of one rank, sent after each Step (Op
// empty) and during it (Op names the hook after which it was taken).
type ChunksEvent struct {
	Rank   int
	Step   int // Step calls so far
	Chunks []ChunkInfo
	Op     string // "" at rest; else e.g. "post-bwd layer4.1.conv2"
	Hook   int    // hook index of the step (mid-step snapshots)
}

// ParamsOn is where the chunk's parameters live now: its full payload, or
// for a released sharded chunk its shard.
func (c ChunkInfo) ParamsOn() Location {
	if c.Payload == Nowhere {
		return c.Shard
	}
	return c.Payload
}
