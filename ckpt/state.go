package ckpt

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"resnetlab/fsutil"

	"resnetlab/engine"
	"resnetlab/model"
	"resnetlab/report"
)

// Checkpoint contents. model_E.pth holds the full model (torchvision keys,
// fp32 master weights, BN buffers, num_batches_tracked as i64);
// optimizer_E.pth holds Adam's moments per parameter ("state.I.exp_avg",
// "state.I.exp_avg_sq", I the parameter's index in state-dict order), the
// step count and the loss scaler; lr_scheduler_E.pth holds MultiStepLR's
// settings and last_epoch. Metadata records where in training the
// checkpoint was taken: "epoch" (the E of the file names) and "step", the
// steps done within that epoch (equal to "steps_per_epoch" at an epoch's
// end; less for a checkpoint taken mid-epoch with the c key or Ctrl-C).

// Meta is the metadata every file of a checkpoint carries.
type Meta struct {
	Epoch, Step, StepsPerEpoch int
	Plugin, Precision          string
	World, Width, InChannels   int
	Classes                    int
	Dataset                    string
	SynTest, SynSeed           int // the synthetic set, so eval can rebuild it
	History                    []report.EpochResult
	// Partial is the epoch in progress of a mid-epoch checkpoint (nil at
	// an epoch end): a resumed run reports that epoch's mean loss, time and
	// images over all its steps, not only those after the resume.
	Partial *PartialEpoch
}

// PartialEpoch is the running sums of an epoch interrupted at a step.
type PartialEpoch struct {
	LossSum float64
	Steps   int
	Seconds float64
}

// ref names the checkpoint these metadata are written under: an epoch's
// end when Step is the whole epoch, else mid-epoch.
func (m Meta) Ref() Ref {
	if m.Step >= m.StepsPerEpoch {
		return Ref{Epoch: m.Epoch}
	}
	return Ref{Epoch: m.Epoch, Step: m.Step}
}

func (m Meta) toMap() map[string]any {
	return map[string]any{
		"epoch": m.Epoch, "step": m.Step, "steps_per_epoch": m.StepsPerEpoch,
		"plugin": m.Plugin, "precision": m.Precision, "world_size": m.World,
		"width": m.Width, "in_channels": m.InChannels, "num_classes": m.Classes,
		"dataset": m.Dataset, "format": "resnetlab checkpoint",
		"synthetic_test": m.SynTest, "synthetic_seed": m.SynSeed,
	}
}

// modelEntries converts a state dict to checkpoint tensors.
func modelEntries(sd []model.NamedTensor) []Tensor {
	out := make([]Tensor, len(sd))
	for i, nt := range sd {
		out[i] = Tensor{Name: nt.Name, Shape: nt.Shape, DType: DTypeF32, F32: nt.Data}
		if nt.Int64 != nil {
			out[i].DType, out[i].F32, out[i].I64 = DTypeI64, nil, nt.Int64
		}
	}
	return out
}

// StateDict converts model checkpoint tensors back to a state dict.
func StateDict(ts []Tensor) []model.NamedTensor {
	out := make([]model.NamedTensor, len(ts))
	for i, t := range ts {
		out[i] = model.NamedTensor{Name: t.Name, Shape: t.Shape, Data: t.F32, Int64: t.I64}
	}
	return out
}

func optimizerEntries(st *engine.State) []Tensor {
	ts := []Tensor{{Name: "step", DType: DTypeI64, Shape: []int{}, I64: []int64{int64(st.Step)}}}
	for i := range st.ExpAvg {
		n := len(st.ExpAvg[i])
		ts = append(ts,
			Tensor{Name: fmt.Sprintf("state.%d.exp_avg", i), DType: DTypeF32, Shape: []int{n}, F32: st.ExpAvg[i]},
			Tensor{Name: fmt.Sprintf("state.%d.exp_avg_sq", i), DType: DTypeF32, Shape: []int{n}, F32: st.ExpAvgSq[i]})
	}
	return ts
}

// saveID ties the three files of one save together: a digest of the
// training position and of every model and optimizer value, recorded as
// "save_id" in all three, so files of two saves never pass for one
// (CheckSameSnapshot). A digest rather than a random id keeps the files
// of two bit-identical runs bit-identical.
func saveID(st *engine.State, meta Meta) string {
	h := sha256.New()
	fmt.Fprintf(h, "epoch %d step %d of %d\n", meta.Epoch, meta.Step, meta.StepsPerEpoch)
	for _, ts := range [][]Tensor{modelEntries(st.Model), optimizerEntries(st)} {
		for i := range ts {
			hashTensor(h, &ts[i])
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func hashTensor(w io.Writer, t *Tensor) {
	fmt.Fprintf(w, "%s %s %v\n", t.Name, t.DType, t.Shape)
	buf := make([]byte, 0, 8*len(t.F32)+8*len(t.I64))
	for _, v := range t.F32 {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	for _, v := range t.I64 {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
	}
	w.Write(buf)
}

// modelMeta is model_E.pth's metadata.
func modelMeta(meta Meta, id string) map[string]any {
	m := meta.toMap()
	m["save_id"] = id
	return m
}

// Save writes the three files of st; it returns their paths.
func Save(dir string, st *engine.State, meta Meta, sched model.MultiStepLR) ([]string, error) {
	mp, op, sp := meta.Ref().Paths(dir)
	id := saveID(st, meta)
	om := meta.toMap()
	om["save_id"] = id
	if st.Scaler != nil {
		om["loss_scale"] = st.Scaler.Scale
		om["scaler_good_steps"] = st.Scaler.GoodSteps
		om["scaler_overflows"] = st.Scaler.Overflows
		om["scaler_skipped"] = st.Scaler.SkipCount
	}
	sm := meta.toMap()
	sm["save_id"] = id
	sm["base_lr"] = sched.Base
	sm["milestones"] = sched.Milestones
	sm["gamma"] = sched.Gamma
	sm["last_epoch"] = meta.Epoch
	if len(meta.History) > 0 {
		sm["history"] = historyMeta(meta.History)
	}
	if p := meta.Partial; p != nil {
		sm["partial_epoch"] = map[string]any{"loss_sum": p.LossSum, "steps": p.Steps, "seconds": p.Seconds}
	}
	// Model last: a reader that finds model_E.pth finds the other two.
	if err := WriteFile(op, "optimizer", om, optimizerEntries(st)); err != nil {
		return nil, err
	}
	if err := WriteFile(sp, "lr_scheduler", sm, nil); err != nil {
		return nil, err
	}
	if err := WriteFile(mp, "model", modelMeta(meta, id), modelEntries(st.Model)); err != nil {
		return nil, err
	}
	return []string{mp, op, sp}, nil
}

// Loaded is a checkpoint read back from disk.
type Loaded struct {
	State         *engine.State
	Epoch         int
	Step          int // steps done within Epoch (== StepsPerEpoch when complete)
	StepsPerEpoch int
	// History is the run's per-epoch results up to the checkpoint.
	History []report.EpochResult
	Partial *PartialEpoch // nil: none recorded (epoch end, or an older file)
}

// Load reads ref's three files from dir and checks they fit
// the run (same model shape; any world size or plugin may resume).
func Load(dir string, ref Ref) (*Loaded, error) {
	mp, op, sp := ref.Paths(dir)
	if _, err := os.Stat(mp); err != nil {
		have, _ := ListRefs(dir)
		return nil, fmt.Errorf("resume %s: no checkpoint %s (checkpoints in %s: %s)", ref, mp, dir, orNoneList(have))
	}
	meta, mts, err := ReadFile(mp, "model")
	if err != nil {
		return nil, err
	}
	om, ots, err := ReadFile(op, "optimizer")
	if err != nil {
		return nil, err
	}
	sm, _, err := ReadFile(sp, "lr_scheduler")
	if err != nil {
		return nil, err
	}
	cfg, err := CheckModelMeta(mp, meta)
	if err != nil {
		return nil, err
	}
	if err := CheckStateShapes(cfg, StateDict(mts)); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", mp, err)
	}
	lc := &Loaded{Epoch: ref.Epoch, State: &engine.State{Model: StateDict(mts)},
		History: historyFromMeta(sm["history"]), Partial: partialFromMeta(sm["partial_epoch"])}
	if lc.Step, err = MetaInt(meta, "step"); err != nil {
		return nil, fmt.Errorf("%s: %w", mp, err)
	}
	if lc.StepsPerEpoch, err = MetaInt(meta, "steps_per_epoch"); err != nil {
		return nil, fmt.Errorf("%s: %w", mp, err)
	}
	if err := readOptimizer(op, om, ots, lc.State); err != nil {
		return nil, err
	}
	if err := checkMoments(op, lc.State, ParamLens(cfg)); err != nil {
		return nil, err
	}
	return lc, nil
}

func readOptimizer(path string, meta map[string]any, ts []Tensor, st *engine.State) error {
	byName := map[string]*Tensor{}
	for i := range ts {
		byName[ts[i].Name] = &ts[i]
	}
	step, ok := byName["step"]
	if !ok || len(step.I64) != 1 {
		return fmt.Errorf("%s: no i64 scalar \"step\"", path)
	}
	st.Step = int(step.I64[0])
	for i := 0; ; i++ {
		m, okm := byName[fmt.Sprintf("state.%d.exp_avg", i)]
		v, okv := byName[fmt.Sprintf("state.%d.exp_avg_sq", i)]
		if !okm || !okv {
			break
		}
		st.ExpAvg = append(st.ExpAvg, m.F32)
		st.ExpAvgSq = append(st.ExpAvgSq, v.F32)
	}
	if scale, ok := meta["loss_scale"].(float64); ok {
		good, _ := MetaInt(meta, "scaler_good_steps")
		over, _ := MetaInt(meta, "scaler_overflows")
		skipped, _ := MetaInt(meta, "scaler_skipped")
		st.Scaler = &engine.LossScaler{Scale: scale, GoodSteps: good, Overflows: over, SkipCount: skipped}
	}
	return nil
}

// checkMoments makes sure the optimizer file holds one pair of Adam
// moments per parameter, each as long as its parameter.
func checkMoments(path string, st *engine.State, lens []int) error {
	if len(st.ExpAvg) != len(lens) {
		return fmt.Errorf("checkpoint %s: %d parameters' Adam moments, want %d", path, len(st.ExpAvg), len(lens))
	}
	for i, n := range lens {
		if len(st.ExpAvg[i]) != n || len(st.ExpAvgSq[i]) != n {
			return fmt.Errorf("checkpoint %s: tensor \"state.%d.exp_avg\" has %d values and \"state.%d.exp_avg_sq\" %d, want %d",
				path, i, len(st.ExpAvg[i]), i, len(st.ExpAvgSq[i]), n)
		}
	}
	return nil
}

// FileSHA256 is the hex digest of a file.
func FileSHA256(path string) (string, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ModelDigest is the SHA-256 of the model file a checkpoint of st would
// have, for runs that keep no checkpoints.
func ModelDigest(st *engine.State, meta Meta) (string, error) {
	dir, err := os.MkdirTemp("", "resnetlab-digest-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	path, _, _ := meta.Ref().Paths(dir)
	if err := WriteFile(path, "model", modelMeta(meta, saveID(st, meta)), modelEntries(st.Model)); err != nil {
		return "", err
	}
	return FileSHA256(path)
}
