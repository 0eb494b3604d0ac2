package runner

import (
	"resnetlab/ckpt"
	"resnetlab/report"
	"time"
)

// The runner talks to its front ends (the TUI, headless mode, tests) only
// through this API: it publishes Events on a channel and accepts Commands.
// It never imports the TUI.

// Event is anything a run publishes. Every event names the run it is about.
type Event interface{ RunID() string }

// RunInfo describes one cell of a spec's grid.
type RunInfo struct {
	ID            string // unique within a spec, e.g. "gemini-fp16-2"
	Spec          string // spec name
	Plugin        string
	Precision     string
	WorldSize     int // ranks
	Dataset       string
	Epochs        int
	Backend       string   // "cpu" or "cuda"
	Devices       []string // one device name per rank
	StepsPerEpoch int
	CheckpointDir string
}

// RunQueued is sent once per grid cell when the spec is loaded, and again
// when a finished run is re-opened by ResumeFrom (it then waits to start).
type RunQueued struct {
	Info RunInfo
	From ckpt.Ref // a re-opened run: the checkpoint it will start from (zero when first queued)
}

// RunStarted is sent when a run begins (or resumes) training. A
// MemoryUsage of every rank follows at once, so that a run resumed with
// nothing left to train still reports what it holds.
type RunStarted struct {
	Info       RunInfo
	StartEpoch int // 0 for a fresh run, E when resumed from a checkpoint of epoch E
	StartStep  int // 0: from epoch E's end; S: from step S of epoch E (a mid-epoch save)
	// History is the epochs before the start as the run recorded them
	// (the checkpoint carries them): loss, test accuracy, seconds. A
	// fresh run has none.
	History []report.EpochResult
}

// StepDone is sent after every optimizer step (rank 0's view).
type StepDone struct {
	Run          string
	Epoch        int // 1-based epoch in progress
	Step         int // 1-based step within the epoch
	Steps        int // steps per epoch
	Loss         float64
	LossScale    float64 // 0 when not using a loss scaler
	Skipped      bool    // the step was skipped (inf/nan gradients)
	StepTime     time.Duration
	ImagesPerSec float64
}

// EpochDone is sent after each epoch's evaluation.
type EpochDone struct {
	Run     string
	Epoch   int
	Loss    float64 // mean training loss over the epoch
	TestAcc float64 // fraction in [0,1]
	Seconds float64 // training time of the epoch (evaluation excluded)
	LR      float64 // learning rate used during the epoch
}

// MemoryUsage is one rank's memory accounting, sent periodically.
type MemoryUsage struct {
	Run  string
	Rank int
	// Epoch and Step are the rank's position when it measured: epochs
	// done, and steps done into the next. In a world of processes the
	// other ranks' usage reaches rank 0 a moment after they measured it.
	Epoch, Step int
	Device      [6]int64 // bytes in use in the rank's backend per kernels.Category
	Host        [6]int64 // Gemini's host tier per kernels.Category (zero for other plugins)
	// DevicePeak is the backend's peak since the run started (evaluation
	// included): what the results record as peak_device_bytes_per_rank.
	DevicePeak int64
	// HostPeak is the peak since the run started of the host bytes outside
	// the rank's backend: Gemini's host tier, HostPageable's buffers and
	// HostPinned.
	HostPeak int64
	// HostPageable is the host bytes in use outside the backend, in
	// ordinary (pageable) memory: the host tier, the staging of
	// comm = "host", the host batch buffers. HostPinned is page-locked
	// host memory the rank holds (none on the CPU backend).
	HostPageable, HostPinned int64
	// DeviceIsHost is set on the CPU backend: the device is host memory.
	DeviceIsHost bool
	Budget       int64 // device budget, 0 when unlimited
	Capacity     int64 // device capacity, 0 when unknown/CPU
}

// HostTotal is all the host memory the rank holds now: HostPageable and
// HostPinned (at least the host tier's bytes, which they include), and on
// the CPU backend (DeviceIsHost) the backend's bytes, which are host
// memory too.
func (u MemoryUsage) HostTotal() int64 {
	t := u.HostPageable + u.HostPinned
	var tier, dev int64
	for i := range u.Host {
		tier += u.Host[i]
		dev += u.Device[i]
	}
	t = max(t, tier)
	if u.DeviceIsHost {
		t += dev
	}
	return t
}

// HostTotalPeak is the peak of HostTotal: HostPeak, plus DevicePeak on the
// CPU backend. It is what the results record as peak_host_bytes_per_rank.
func (u MemoryUsage) HostTotalPeak() int64 {
	if u.DeviceIsHost {
		return u.HostPeak + u.DevicePeak
	}
	return u.HostPeak
}

// GeminiStep is one rank's Gemini memory statistics of one step
// (ColossalAI's Gemini memstats).
type GeminiStep struct {
	Run                string
	Rank, Step         int
	H2DBytes, D2HBytes int64 // chunk bytes moved host -> device and back
	Evictions          int
	EvictTime          time.Duration
	PeakDevice         int64
	HostInUse          int64 // host tier bytes at the step's end
	HostPeak           int64
	NonModelPeak       int64   // largest traced non-model bytes of an operator
	WastePct           float64 // chunk padding, percent of capacity
}

// ChunkState is a Gemini chunk's state summary for the chunk strip.
type ChunkState struct {
	ID       int
	OnDevice bool
	// Count of the chunk's tensors in each state:
	// FREE, COMPUTE, HOLD, HOLD_AFTER_BWD, READY_FOR_REDUCE.
	States [5]int
	Bytes  int64
	Params string // where its parameters live: "device", "host" or "nowhere"
	Optim  string // where its fp32 master and Adam moments live
}

// ChunksUpdate is the state of every Gemini chunk of one rank, at the end
// of a step (Op empty) or during it (Op names the operator hook after
// which the snapshot was taken; at most one per step and rank, each phase in turn).
type ChunksUpdate struct {
	Run    string
	Rank   int
	Step   int // steps done when taken
	Op     string
	Chunks []ChunkState
}

// ChunkMoved reports one chunk move between device and host.
type ChunkMoved struct {
	Run      string
	Rank     int
	Chunk    int
	ToDevice bool
	Bytes    int64
	Prefetch bool // an upload issued ahead of the operator that needs it ([gemini] max_prefetch)
	// Clean: the payload left the device without a copy (Bytes 0): its
	// host copy was still current, so the device copy was only freed.
	Clean bool
	// Eval: made outside the training steps, by an evaluation's forward
	// passes. Such a move is in no GeminiStep and not in the results'
	// h2d_bytes/d2h_bytes (those count the training steps), but in their
	// eval_h2d_bytes/eval_d2h_bytes.
	Eval bool
}

// ChunkMoves is one rank's chunk moves since its run started, counted as
// the ChunkMoved events of that rank would count them (Clean moves are
// not in ToHost). Rank 0 of a world of processes emits it for the ranks
// of the other processes, from their reports (their ChunkMoved events
// stay in their own process). Each event replaces the rank's previous one.
type ChunkMoves struct {
	Run                     string
	Rank                    int
	ToDevice, ToHost, Clean int
	Prefetched              int   // of ToDevice: issued ahead of the operator
	H2DBytes, D2HBytes      int64 // bytes moved to the device / to the host
	// EvalH2D, EvalD2H: the part of H2DBytes, D2HBytes moved outside the
	// training steps (ChunkMoved.Eval).
	EvalH2D, EvalD2H int64
}

// CheckpointSaved is sent when the three files of a checkpoint are on disk.
type CheckpointSaved struct {
	Run   string
	Epoch int
	Step  int // 0 at the epoch's end; S for a save S steps into the epoch
	Dir   string
	Files []string
}

// Paused and Resumed confirm a Pause/Resume command at a step boundary.
// Every Pause and every Resume is answered, also one that finds the run
// in that state already.
type Paused struct {
	Run   string
	Epoch int
	Step  int
}
type Resumed struct{ Run string }

// Log is a line for the log tail (and headless output).
type Log struct {
	Run   string
	Time  time.Time
	Level Level
	Text  string
}

// Level is how much a Log line matters.
type Level string

// Log levels.
const (
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"  // something the user should know (a fallback, an ignored command)
	LevelError Level = "error" // something failed, the run goes on (a checkpoint not written)
)

// RunFinished is the last event of a run. Err is nil on success; a run that
// missed target_acc finishes with an error saying so.
type RunFinished struct {
	Run    string
	Result *report.Result
	Err    error
	// Kept, when not "", says why Result was not written: its result file
	// was left as it was (a resume with nothing left to train; a partial
	// run beside another training's done result). The file, not Result,
	// is then the run's record, for a comparison figure too.
	Kept string
}

func (e RunQueued) RunID() string       { return e.Info.ID }
func (e RunStarted) RunID() string      { return e.Info.ID }
func (e StepDone) RunID() string        { return e.Run }
func (e EpochDone) RunID() string       { return e.Run }
func (e MemoryUsage) RunID() string     { return e.Run }
func (e ChunksUpdate) RunID() string    { return e.Run }
func (e ChunkMoved) RunID() string      { return e.Run }
func (e ChunkMoves) RunID() string      { return e.Run }
func (e GeminiStep) RunID() string      { return e.Run }
func (e CheckpointSaved) RunID() string { return e.Run }
func (e Paused) RunID() string          { return e.Run }
func (e Resumed) RunID() string         { return e.Run }
func (e Log) RunID() string             { return e.Run }
func (e RunFinished) RunID() string     { return e.Run }

// Command is something a front end asks of a run. Commands take effect at
// the next step boundary.
//
// Wrap a command in To to address one run of the grid: RunSpec delivers it
// to that run only, whether the runs train one after another or at once.
// A command sent without To goes to every run that is training (the only
// one when runs train one after another), or to the next run to start
// when none is.
type Command interface{ isCommand() }

type (
	Pause         struct{}
	Resume        struct{}
	CheckpointNow struct{}
	Stop          struct{ Checkpoint bool } // stop the run, checkpointing first if asked
	// ResumeFrom restarts the run from a saved checkpoint: the end of
	// epoch Epoch, or Step steps into it (Step > 0, a mid-epoch save), as
	// a fresh run with --resume of it would, to the same model bit for
	// bit. The run answers with RunStarted and trains, also when it was
	// paused (a refused resume leaves it as it was). A run that has
	// already finished (done, failed, stopped or interrupted) is
	// re-opened: a new job trains it from that epoch to the spec's last
	// and replaces its result (RunQueued, RunStarted, ..., RunFinished
	// again). That needs RunSpec to be still running: see
	// RunOptions.StayOpen.
	ResumeFrom struct{ Epoch, Step int }
	// Quit ends the whole grid, as quitting the UI does: runs that have not
	// started never start (nothing of theirs is touched), and every run
	// that trains stops at its next step boundary, checkpointing first when
	// Checkpoint is set and it has trained since it started, and is
	// recorded interrupted, like Ctrl-C. Send it without To.
	Quit struct{ Checkpoint bool }
	// To addresses Cmd to the run whose RunInfo.ID is Run.
	To struct {
		Run string
		Cmd Command
	}
)

func (Pause) isCommand()         {}
func (Resume) isCommand()        {}
func (CheckpointNow) isCommand() {}
func (Stop) isCommand()          {}
func (ResumeFrom) isCommand()    {}
func (Quit) isCommand()          {}
func (To) isCommand()            {}

// Ref is the checkpoint a ResumeFrom names.
func (c ResumeFrom) Ref() ckpt.Ref { return ckpt.Ref(c) }
