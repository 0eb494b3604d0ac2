package runner

import (
	"fmt"
	"slices"
	"strings"

	"resnetlab/ckpt"
	"resnetlab/comm"
	"resnetlab/spec"
)

// RunOptions adjusts how RunSpec runs a spec; the zero value runs the spec
// as written.
type RunOptions struct {
	Resume     ckpt.Ref // non-zero: resume every run from this checkpoint instead of the spec's resume
	Device     string   // "auto", "cpu" or "cuda" instead of the spec's device; "" keeps it
	ResultsDir string   // instead of the spec's results_dir; "" keeps it
	Runs       []string // non-empty: train only these runs (cell IDs) of the grid, in the grid's order
	Headless   bool     // no TUI is attached (events go to the headless printer)
	// StayOpen keeps RunSpec serving commands after the last run has
	// finished, so that a front end can re-open a finished run with
	// ResumeFrom; RunSpec then returns when cmds is closed or ctx is done.
	// Without it RunSpec returns as soon as every run has finished.
	StayOpen bool
	// World, when set, makes this process one rank of a run whose world
	// spans processes (dist.go); the grid must hold one run of its size.
	World *comm.ProcComm
}

// Apply returns a copy of s with the options' overrides applied and
// checked, and its cells. RunSpec starts with it; the CLI calls it first to
// report problems before anything starts.
func (o RunOptions) Apply(s *spec.Spec) (*spec.Spec, []spec.Cell, []spec.Rejection, error) {
	c, cells, rejected, _, err := o.apply(s)
	return c, cells, rejected, err
}

// apply is Apply, also returning the spec's own checkpoint directory of
// every cell that keeps its checkpoints elsewhere (placeCheckpoints).
func (o RunOptions) apply(s *spec.Spec) (*spec.Spec, []spec.Cell, []spec.Rejection, map[string]string, error) {
	c, cells, rejected, err := o.override(s)
	if err != nil {
		return nil, nil, rejected, nil, err
	}
	moved := placeCheckpoints(cells, o.StartFrom(c))
	return c, cells, rejected, moved, nil
}

// placeCheckpoints points every cell at the directory it really uses
// (ckpt/dirs.go): a fresh run whose directory holds another run's
// checkpoint files writes to a new numbered sibling, touching none of
// them; a resume reads the newest directory holding its checkpoint. It
// returns the spec's directory of each cell it moved.
func placeCheckpoints(cells []spec.Cell, from ckpt.Ref) map[string]string {
	moved := map[string]string{}
	for i, c := range cells {
		if noCheckpoints(c.CheckpointDir) {
			continue
		}
		dir := ckpt.FreshDir(c.CheckpointDir)
		if !from.IsZero() {
			dir = ckpt.ResumeDir(c.CheckpointDir, from)
		}
		if dir != c.CheckpointDir {
			moved[c.ID] = c.CheckpointDir
			cells[i].CheckpointDir = dir
		}
	}
	return moved
}

// A FlagError is a run flag's value that the spec cannot take (--resume,
// --device, --run): a usage error, which the command line reports as one
// (exit status 2).
type FlagError struct{ msg string }

func (e *FlagError) Error() string { return e.msg }

func flagErrorf(format string, args ...any) error {
	return &FlagError{fmt.Sprintf(format, args...)}
}

// override applies the options to a copy of s and expands its cells.
func (o RunOptions) override(s *spec.Spec) (*spec.Spec, []spec.Cell, []spec.Rejection, error) {
	c := *s
	if o.Resume.Epoch < 0 || o.Resume.Step < 0 || (o.Resume.Epoch == 0 && o.Resume.Step != 0) {
		return nil, nil, nil, flagErrorf("--resume %s: want an epoch E >= 1, or E@S", o.Resume)
	}
	if !o.Resume.IsZero() {
		if o.Resume.Epoch > s.Epochs {
			return nil, nil, nil, flagErrorf("--resume %s: %s trains %d epochs (want 1 to %d)", o.Resume, s.File, s.Epochs, s.Epochs)
		}
		c.Resume = o.Resume.Epoch
	}
	if o.Device != "" {
		if err := spec.CheckDevice(o.Device); err != nil {
			return nil, nil, nil, flagErrorf("--device %q: %v", o.Device, err)
		}
		c.Device = o.Device
	}
	if o.ResultsDir != "" {
		c.ResultsDir = o.ResultsDir
	}
	cells, rejected, err := c.Cells()
	if err != nil {
		return nil, nil, rejected, err
	}
	if cells, err = selectRuns(&c, cells, o.Runs); err != nil {
		return nil, nil, rejected, err
	}
	return &c, cells, rejected, nil
}

// selectRuns keeps the cells --run names (all of them when it names none),
// in the grid's order; a name that is no run of the grid is an error that
// lists the runs there are.
func selectRuns(s *spec.Spec, cells []spec.Cell, ids []string) ([]spec.Cell, error) {
	if len(ids) == 0 {
		return cells, nil
	}
	want := map[string]bool{}
	for _, id := range ids {
		if !slices.ContainsFunc(cells, func(c spec.Cell) bool { return c.ID == id }) {
			have := make([]string, len(cells))
			for i, c := range cells {
				have[i] = c.ID
			}
			return nil, flagErrorf("--run %q: %s has no run %q (its runs: %s)", id, s.File, id, strings.Join(have, ", "))
		}
		want[id] = true
	}
	return slices.DeleteFunc(slices.Clone(cells), func(c spec.Cell) bool { return !want[c.ID] }), nil
}

// EvalOptions says which checkpoint Eval measures and on what.
type EvalOptions struct {
	CheckpointDir string     // directory holding model_E.pth
	Epoch         int        // E, >= 1
	Step          int        // S of a mid-epoch checkpoint E@S (model_E-stepS.pth); 0: the end of epoch E
	Dataset       string     // "" = the checkpoint's metadata "dataset" (eval refuses when it has none)
	DataDir       string     // "" = $DATA, else ./data
	Device        string     // "auto" (default when ""), "cpu" or "cuda"
	BatchSize     int        // 0 = 128, the reference's eval batch
	Spec          *spec.Spec // optional: synthetic sizes and seed, in_channels, width
}

// Ref is the checkpoint eval reads: E, or E@S.
func (o EvalOptions) Ref() ckpt.Ref { return ckpt.Ref{Epoch: o.Epoch, Step: o.Step} }

// StartFrom is the checkpoint every run of s starts from: --resume's, else
// the end of the spec's resume epoch (zero: a fresh start).
func (o RunOptions) StartFrom(s *spec.Spec) ckpt.Ref {
	if !o.Resume.IsZero() {
		return o.Resume
	}
	return ckpt.Ref{Epoch: s.Resume}
}
