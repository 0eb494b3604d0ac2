package spec

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"resnetlab/fsutil"
	"resnetlab/model"

	"github.com/BurntSushi/toml"
)

// maxSpecBytes bounds a spec file: real specs are a few KiB, and the TOML
// decoder's memory grows faster than the input.
const maxSpecBytes = 4 << 20

// Load reads and validates the spec file at path.
func Load(path string) (*Spec, error) {
	src, err := fsutil.ReadFile(path, maxSpecBytes)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("spec %s: file not found", path)
		}
		var fe *fsutil.Error
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("spec %w", err)
		}
		return nil, fmt.Errorf("spec %s: %w", path, err)
	}
	return Parse(path, src)
}

// Parse parses and validates spec source; name is the file name used in
// error messages and for the default spec name. The error, when not nil,
// lists every problem found, one "FILE:LINE: key `x`: ..." per line.
func Parse(name string, src []byte) (*Spec, error) {
	return ParseWithEnv(name, src, os.Getenv)
}

// ParseWithEnv is Parse with getenv in place of os.Getenv (tests pass
// one that sees no environment).
func ParseWithEnv(name string, src []byte, getenv func(string) string) (*Spec, error) {
	if err := checkSpecDepth(name, src); err != nil {
		return nil, err
	}
	var raw rawSpec
	md, err := toml.Decode(string(src), &raw)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	d := &decoder{file: name, md: md, idx: indexLines(string(src)), bad: map[string]bool{}}
	s := Defaults(name, getenv)
	d.topLevel(&raw, s)
	d.synthetic(raw.Synthetic, s)
	d.grid(raw.Grid, s)
	d.runs(raw.Run, s)
	d.zero(raw.Zero, s)
	d.fp16(raw.FP16, s)
	d.gemini(raw.Gemini, s)
	d.unknownKeys()
	d.crossChecks(s)
	if err := joinSpecErrors(d.errs); err != nil {
		return nil, err
	}
	s.src = d.idx
	return s, nil
}

// syntaxError turns a TOML parse error into "FILE:LINE: ..." form.
func syntaxError(file string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		e := &Error{File: file, Line: pe.Position.Line, Key: pe.LastKey,
			Msg: "TOML syntax error: " + pe.Message}
		if e.Line < 1 {
			e.Line = 1
		}
		return e
	}
	return &Error{File: file, Line: 1, Msg: "cannot decode TOML: " + err.Error()}
}

// MaxEpochs, maxRanks and MaxImages bound what a spec may ask for, so no
// value can ask for an allocation the input cannot justify; checkpoint and
// import readers apply the same bounds.
const (
	MaxEpochs = 100000
	maxRanks  = 1024
	MaxImages = 10000000
)

func (d *decoder) topLevel(r *rawSpec, s *Spec) {
	d.stringVal("name", r.Name, &s.Name, "a string", nil)
	d.intVal("epochs", r.Epochs, &s.Epochs, intRange(1, MaxEpochs))
	d.intVal("batch_size", r.BatchSize, &s.BatchSize, intRange(1, 1<<20))
	d.stringVal("dataset", r.Dataset, &s.Dataset, "a string", datasets)
	d.stringVal("data_dir", r.DataDir, &s.DataDir, "a directory path", nil)
	s.dataDirSet = d.md.IsDefined("data_dir")
	d.intVal("in_channels", r.InChannels, &s.InChannels, oneOfInt(1, 3))
	d.intVal("width", r.Width, &s.Width, intRange(1, model.MaxWidth))
	d.int64Val("seed", r.Seed, &s.Seed, intRange(math.MinInt64, math.MaxInt64))
	d.floatVal("lr", r.LR, &s.LR, floatRange(0, 10, true, false))
	d.intList("milestones", r.Milestones, &s.Milestones, intRange(1, MaxEpochs))
	d.floatVal("gamma", r.Gamma, &s.Gamma, floatRange(0, 1, true, false))
	d.stringVal("checkpoint", r.Checkpoint, &s.Checkpoint, "a directory path", nil)
	d.intVal("interval", r.Interval, &s.Interval, intRange(0, MaxEpochs))
	d.intVal("resume", r.Resume, &s.Resume, intRange(0, MaxEpochs))
	d.floatVal("target_acc", r.TargetAcc, &s.TargetAcc, floatRange(0, 1, false, false))
	d.intVal("eval_every", r.EvalEvery, &s.EvalEvery, intRange(0, MaxEpochs))
	d.stringVal("results_dir", r.ResultsDir, &s.ResultsDir, "a directory path", nil)
	d.stringVal("device", r.Device, &s.Device, "a string", devices)
	d.boolVal("concurrent", r.Concurrent, &s.Concurrent)
	d.boolVal("share_devices", r.ShareDevices, &s.ShareDevices)
	d.stringVal("comm", r.Comm, &s.Comm, "a string", comms)
	d.boolVal("device_batches", r.DeviceBatch, &s.DeviceBatches)
	d.boolVal("cuda_graphs", r.CUDAGraphs, &s.CUDAGraphs)
}

func oneOfInt(vals ...int64) intRule {
	return func(v int64) string {
		for _, x := range vals {
			if v == x {
				return ""
			}
		}
		s := make([]string, len(vals))
		for i, x := range vals {
			s[i] = fmt.Sprint(x)
		}
		return fmt.Sprintf("%d is not allowed (want %s)", v, strings.Join(s, " or "))
	}
}

func (d *decoder) synthetic(p toml.Primitive, s *Spec) {
	var r rawSynthetic
	seedSet := false
	if d.table("synthetic", p, &r) {
		d.intVal("synthetic.train", r.Train, &s.Synthetic.Train, intRange(1, MaxImages))
		d.intVal("synthetic.test", r.Test, &s.Synthetic.Test, intRange(1, MaxImages))
		seedSet = d.int64Val("synthetic.seed", r.Seed, &s.Synthetic.Seed,
			intRange(math.MinInt64, math.MaxInt64))
	}
	if !seedSet {
		s.Synthetic.Seed = s.Seed
	}
}

func (d *decoder) grid(p toml.Primitive, s *Spec) {
	var r rawGrid
	if !d.table("grid", p, &r) {
		return
	}
	d.stringList("grid.plugin", r.Plugin, &s.Grid.Plugin, plugins)
	d.stringList("grid.precision", r.Precision, &s.Grid.Precision, precisions)
	d.intList("grid.gpus", r.GPUs, &s.Grid.GPUs, intRange(1, maxRanks))
}

func (d *decoder) runs(p toml.Primitive, s *Spec) {
	v := d.value(p)
	if v == nil {
		return
	}
	if !isTableArray(v) {
		d.wrongType("run", v, "[[run]] tables")
		return
	}
	var raws []rawRun
	if err := d.md.PrimitiveDecode(p, &raws); err != nil {
		d.errf("run", "%v", err)
		return
	}
	for i, r := range raws {
		d.runEntry(fmt.Sprintf("run[%d]", i+1), r, s)
	}
}

func isTableArray(v any) bool {
	switch a := v.(type) {
	case []map[string]any:
		return true
	case []any: // run = [{...}, {...}]
		for _, e := range a {
			if _, ok := e.(map[string]any); !ok {
				return false
			}
		}
		return true
	}
	return false
}

func (d *decoder) runEntry(path string, r rawRun, s *Spec) {
	e := RunEntry{GPUs: 1}
	if !d.stringVal(path+".plugin", r.Plugin, &e.Plugin, "a string", plugins) {
		if d.value(r.Plugin) == nil {
			d.errf(path, "missing key `plugin` (want one of %s)", orList(plugins))
		}
		return
	}
	d.stringVal(path+".precision", r.Precision, &e.Precision, "a string", precisions)
	d.intVal(path+".gpus", r.GPUs, &e.GPUs, intRange(1, maxRanks))
	s.Runs = append(s.Runs, e)
}

func (d *decoder) zero(p toml.Primitive, s *Spec) {
	var r rawZero
	if d.table("zero", p, &r) {
		d.intVal("zero.stage", r.Stage, &s.Zero.Stage, oneOfInt(1, 2))
	}
}

func (d *decoder) fp16(p toml.Primitive, s *Spec) {
	var r rawFP16
	if !d.table("fp16", p, &r) {
		return
	}
	f := &s.FP16
	positive := floatRange(0, math.Inf(1), true, true)
	d.floatPtr("fp16.initial_scale", r.InitialScale, &f.InitialScale, positive)
	d.floatPtr("fp16.growth_factor", r.GrowthFactor, &f.GrowthFactor, floatRange(1, 1e6, true, false))
	d.floatPtr("fp16.backoff_factor", r.BackoffFactor, &f.BackoffFactor, floatRange(0, 1, true, true))
	d.intPtr("fp16.growth_interval", r.GrowthInterval, &f.GrowthInterval, intRange(1, 1<<31-1))
	d.intPtr("fp16.hysteresis", r.Hysteresis, &f.Hysteresis, intRange(1, 1<<31-1))
	d.floatPtr("fp16.min_scale", r.MinScale, &f.MinScale, floatRange(0, math.Inf(1), false, true))
	d.floatPtr("fp16.max_scale", r.MaxScale, &f.MaxScale, floatRange(0, math.Inf(1), false, true))
}

func (d *decoder) gemini(p toml.Primitive, s *Spec) {
	var r rawGemini
	if !d.table("gemini", p, &r) {
		return
	}
	g := &s.Gemini
	frac := floatRange(0, 1, false, false)
	d.stringVal("gemini.placement", r.Placement, &g.Placement, "a string", []string{"static", "auto"})
	d.sizeVal("gemini.device_budget", r.DeviceBudget, &g.DeviceBudget, false)
	d.sizeVal("gemini.chunk_size", r.ChunkSize, &g.ChunkSize, true)
	d.floatVal("gemini.shard_param_frac", r.ShardParamFrac, &g.ShardParamFrac, frac)
	d.floatVal("gemini.offload_optim_frac", r.OffloadOptimFrac, &g.OffloadOptimFrac, frac)
	d.floatVal("gemini.offload_param_frac", r.OffloadParamFrac, &g.OffloadParamFrac, frac)
	d.floatVal("gemini.gpu_margin_mem_ratio", r.GPUMarginMemRatio, &g.GPUMarginMemRatio, frac)
	d.intVal("gemini.max_prefetch", r.MaxPrefetch, &g.MaxPrefetch, intRange(0, 1<<20))
}

// specNameFromFile is "zero" for "experiments/zero.toml".
func specNameFromFile(file string) string {
	base := filepath.Base(file)
	return strings.TrimSuffix(base, filepath.Ext(base))
}
