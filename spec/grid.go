package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// Cell is one run of a spec's grid.
type Cell struct {
	Plugin        string // torch_ddp, low_level_zero or gemini (torch_ddp_fp16 becomes torch_ddp x fp16)
	Precision     string // fp32, fp16 or bf16
	WorldSize     int    // ranks (the spec's gpus)
	ID            string // "<plugin>-<precision>-<gpus>", unique within the spec
	CheckpointDir string // the checkpoint template expanded for this cell
}

// Rejection is a cell of the spec that will not run, and why.
type Rejection struct {
	Cell   Cell   // as written: Plugin may be torch_ddp_fp16
	Where  string // "FILE:LINE" of the [grid] or [[run]] that produced it
	Reason string
}

func (r Rejection) String() string {
	return fmt.Sprintf("%s: skipping %s x %s x %d: %s", r.Where, r.Cell.Plugin,
		r.Cell.Precision, r.Cell.WorldSize, r.Reason)
}

// candidate is a cell as written, before normalisation.
type candidate struct {
	plugin, precision string // precision "" = plugin default
	gpus              int
	where             string // source path, "grid" or "run[2]"
}

// Cells expands the grid and the [[run]] tables into runs, in file order
// (grid first: plugin, then precision, then gpus). Combinations that make no
// sense, and duplicates, are returned as rejections for the caller to print.
// err is set when no valid run remains, or when runs that checkpoint would
// share a checkpoint directory.
func (s *Spec) Cells() (cells []Cell, rejected []Rejection, err error) {
	seen := map[string]candidate{}
	for _, c := range s.candidates() {
		cell, reason := s.normalize(c)
		if reason == "" {
			if prev, dup := seen[cell.ID]; dup {
				reason = duplicateReason(prev, c, cell.ID)
			}
		}
		if reason != "" {
			shown := Cell{Plugin: c.plugin, Precision: cell.Precision, WorldSize: c.gpus}
			rejected = append(rejected, Rejection{Cell: shown, Where: s.where(c.where), Reason: reason})
			continue
		}
		seen[cell.ID] = c
		cells = append(cells, cell)
	}
	if len(cells) == 0 {
		return nil, rejected, fmt.Errorf("%s: no valid runs: all %d cells of the grid were rejected", s.File, len(rejected))
	}
	if err := s.checkDirsDistinct(cells); err != nil {
		return nil, rejected, err
	}
	if err := s.checkPathLengths(cells); err != nil {
		return nil, rejected, err
	}
	return cells, rejected, nil
}

func (s *Spec) candidates() []candidate {
	var out []candidate
	g := s.Grid
	if len(g.Plugin) > 0 || len(g.Precision) > 0 || len(g.GPUs) > 0 || len(s.Runs) == 0 {
		pl, prec, gpus := g.Plugin, g.Precision, g.GPUs
		if len(pl) == 0 {
			pl = []string{PluginTorchDDP}
		}
		if len(prec) == 0 {
			prec = []string{""}
		}
		if len(gpus) == 0 {
			gpus = []int{1}
		}
		for _, p := range pl {
			for _, q := range prec {
				for _, n := range gpus {
					out = append(out, candidate{p, q, n, "grid"})
				}
			}
		}
	}
	for i, r := range s.Runs {
		out = append(out, candidate{r.Plugin, r.Precision, r.GPUs, fmt.Sprintf("run[%d]", i+1)})
	}
	return out
}

// normalize maps a candidate to its cell, or says why it is invalid.
func (s *Spec) normalize(c candidate) (Cell, string) {
	prec := c.precision
	if prec == "" {
		prec = DefaultPrecision(c.plugin)
	}
	cell := Cell{Plugin: c.plugin, Precision: prec, WorldSize: c.gpus}
	switch {
	case !contains(plugins, c.plugin):
		return cell, fmt.Sprintf("unknown plugin %q (want %s)", c.plugin, orList(plugins))
	case !contains(precisions, prec):
		return cell, fmt.Sprintf("unknown precision %q (want %s)", prec, orList(precisions))
	case c.gpus < 1:
		return cell, fmt.Sprintf("gpus = %d (want at least 1 rank)", c.gpus)
	}
	if reason := PluginPrecisionReason(c.plugin, prec); reason != "" {
		return cell, reason
	}
	if c.plugin == PluginTorchDDPFP16 {
		cell.Plugin = PluginTorchDDP
	}
	if per := s.TrainImages() / c.gpus; per < s.BatchSize {
		return cell, fmt.Sprintf("each of %d ranks gets %d training images, less than one batch of %d "+
			"(want fewer gpus or a smaller batch_size)", c.gpus, per, s.BatchSize)
	}
	cell.ID = fmt.Sprintf("%s-%s-%d", cell.Plugin, cell.Precision, cell.WorldSize)
	cell.CheckpointDir = s.ExpandCheckpoint(cell)
	return cell, ""
}

// PluginPrecisionReason says why a plugin cannot train in a precision
// (names CheckPlugin and CheckPrecision accept), "" when it can: the
// grid's rule, which bench applies to its flags too.
func PluginPrecisionReason(plugin, precision string) string {
	switch {
	case plugin == PluginTorchDDPFP16 && precision != "fp16":
		return fmt.Sprintf("torch_ddp_fp16 is torch_ddp with fp16 and cannot train in %s "+
			"(want plugin torch_ddp with precision %s)", precision, precision)
	case plugin == PluginGemini && precision == "fp32":
		return "ColossalAI's Gemini trains in half precision with fp32 master weights (want fp16 or bf16)"
	case plugin == PluginLowLevelZero && precision == "fp32":
		return "low_level_zero, like ColossalAI's ZeRO example, trains in half precision " +
			"with fp32 master weights (want fp16 or bf16; for fp32 use torch_ddp)"
	}
	return ""
}

func duplicateReason(prev, c candidate, id string) string {
	if prev.plugin != c.plugin {
		return fmt.Sprintf("same run as %s (from %s): torch_ddp_fp16 is torch_ddp with fp16; merged", id, prev.where)
	}
	return fmt.Sprintf("same run as %s (from %s), listed twice; merged", id, prev.where)
}

// where turns a source path into "FILE:LINE".
func (s *Spec) where(path string) string {
	return fmt.Sprintf("%s:%d", s.File, s.src.line(path))
}

// TrainImages is the size of the spec's training set.
func (s *Spec) TrainImages() int {
	switch s.Dataset {
	case "cifar10":
		return 50000
	case "fashion-mnist":
		return 60000
	}
	return s.Synthetic.Train
}

var templateVars = []string{"name", "plugin", "precision", "gpus"}

// ExpandCheckpoint fills the checkpoint template for a cell.
func (s *Spec) ExpandCheckpoint(c Cell) string {
	return strings.NewReplacer("{name}", s.Name, "{plugin}", c.Plugin,
		"{precision}", c.Precision, "{gpus}", strconv.Itoa(c.WorldSize)).Replace(s.Checkpoint)
}

// checkTemplate returns "" or what is wrong with a checkpoint template.
func checkTemplate(t string) string {
	if t == "" {
		return "empty path (want a directory, e.g. \"./checkpoint/{plugin}-{precision}-{gpus}\")"
	}
	rest := t
	for {
		open := strings.IndexByte(rest, '{')
		closing := strings.IndexByte(rest, '}')
		if open < 0 && closing < 0 {
			return ""
		}
		if open < 0 || closing < open {
			return fmt.Sprintf("unbalanced braces in %q (want placeholders like {plugin})", t)
		}
		name := rest[open+1 : closing]
		if !contains(templateVars, name) {
			return fmt.Sprintf("unknown placeholder {%s} in %q (want {name}, {plugin}, {precision} or {gpus})", name, t)
		}
		rest = rest[closing+1:]
	}
}

// checkDirsDistinct makes sure runs that write or read checkpoints do not
// share a directory, where they would overwrite each other's files.
func (s *Spec) checkDirsDistinct(cells []Cell) error {
	if s.Interval == 0 && s.Resume == 0 {
		return nil
	}
	owner := map[string]string{}
	for _, c := range cells {
		if prev, ok := owner[c.CheckpointDir]; ok {
			return &Error{File: s.File, Line: s.src.line("checkpoint"), Key: "checkpoint",
				Msg: fmt.Sprintf("runs %s and %s would share checkpoint directory %q "+
					"(want a template with {plugin}, {precision} and {gpus}, e.g. \"./checkpoint/{plugin}-{precision}-{gpus}\")",
					prev, c.ID, c.CheckpointDir)}
		}
		owner[c.CheckpointDir] = c.ID
	}
	return nil
}

// CheckDevices checks the spec's runs against n available devices: with
// share_devices = false, a run with more ranks than devices is an error.
func (s *Spec) CheckDevices(n int) error {
	if n < 1 {
		return fmt.Errorf("%s: no device to run on (found %d)", s.File, n)
	}
	cells, _, err := s.Cells()
	if err != nil {
		return err
	}
	if s.ShareDevices {
		return nil
	}
	for _, c := range cells {
		if c.WorldSize > n {
			return &Error{File: s.File, Line: s.src.line("share_devices"), Key: "share_devices",
				Msg: fmt.Sprintf("run %s needs %d devices but %d are available "+
					"(want share_devices = true to put several ranks on one device, or gpus <= %d)",
					c.ID, c.WorldSize, n, n)}
		}
	}
	return nil
}
