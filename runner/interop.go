package runner

// Interop with PyTorch. ExportModel turns a checkpoint's model_E.pth (our
// own container) into a file torch.load or safetensors.torch.load_file
// reads straight into torchvision's resnet18: the same keys in the same
// order, the same shapes, float32 tensors and 0-dim int64
// num_batches_tracked. ImportModel goes the other way and writes a full
// checkpoint (model, optimizer with zero Adam moments at step 0, LR
// scheduler) that eval scores and run resumes from.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"resnetlab/ckpt"
	"resnetlab/fsutil"
	"resnetlab/spec"
	"slices"
	"strconv"
	"strings"

	"resnetlab/data"
	"resnetlab/device"
	"resnetlab/engine"
	"resnetlab/kernels"
	"resnetlab/model"
	"resnetlab/model/torchfmt"
)

// Interchange formats of ExportModel.
const (
	FormatSafetensors = "safetensors"
	FormatPth         = "pth"
)

// ExportFormat resolves the format of an export to out: format when given
// (safetensors or pth), else from out's extension (.safetensors; .pth, .pt
// or .bin for torch.save). A format that contradicts .safetensors, .pth or
// .pt is refused, since the file would lie about its content; .bin names
// no format of its own (Hugging Face uses it for torch.save files), so
// either format may go there.
func ExportFormat(format, out string) (string, error) {
	byExt := extFormat(out)
	given := ""
	switch strings.ToLower(format) {
	case FormatSafetensors:
		given = FormatSafetensors
	case FormatPth, "pt", "torch":
		given = FormatPth
	case "":
	default:
		return "", fmt.Errorf("export format %q: want safetensors or pth", format)
	}
	ext := filepath.Ext(out)
	switch {
	case given != "" && byExt != "" && given != byExt && !strings.EqualFold(ext, ".bin"):
		return "", fmt.Errorf("export to %s: format %s, but the extension %q says %s; "+
			"drop the format or name the file .%s", out, format, ext, byExt, extOf(given))
	case given != "":
		return given, nil
	case byExt != "":
		return byExt, nil
	}
	return "", fmt.Errorf("export to %s: cannot tell the format from the extension %q "+
		"(use .safetensors, .pth or .pt, or give the format: safetensors or pth)", out, ext)
}

// extFormat is the format out's extension names, or "".
func extFormat(out string) string {
	switch strings.ToLower(filepath.Ext(out)) {
	case ".safetensors":
		return FormatSafetensors
	case ".pth", ".pt", ".bin":
		return FormatPth
	}
	return ""
}

// extOf is the usual extension of a format, without the dot.
func extOf(format string) string {
	if format == FormatSafetensors {
		return "safetensors"
	}
	return "pth"
}

// ExportModel is ExportCheckpoint of the end of epoch (0: the latest
// complete one).
func ExportModel(dir string, epoch int, format, out string) error {
	_, err := ExportCheckpoint(dir, ckpt.Ref{Epoch: epoch}, format, out)
	return err
}

// ExportCheckpoint writes the model of dir's checkpoint ref (E or E@S; zero:
// the latest complete end-of-epoch one, as ResolveCheckpoint picks it) to
// out, atomically, as safetensors or a torch.save archive (format "" picks
// it from out's extension) with torchvision's keys. out must not exist and
// its directory must: an export creates one file and never replaces one, as
// ImportModel never replaces a checkpoint. It returns the model file it
// exported.
func ExportCheckpoint(dir string, ref ckpt.Ref, format, out string) (string, error) {
	format, err := ExportFormat(format, out)
	if err != nil {
		return "", err
	}
	if err := checkNewFile(out); err != nil { // before the checkpoint is read
		return "", err
	}
	_, path, err := ResolveCheckpoint(dir, ref)
	if err != nil {
		return "", err
	}
	meta, ts, err := ckpt.ReadFile(path, "model")
	if err != nil {
		return "", err
	}
	cfg, _, err := evalModelConfig(path, meta, EvalOptions{})
	if err != nil {
		return "", err
	}
	sd, _, err := checkedStateDict(cfg, ckpt.StateDict(ts))
	if err != nil {
		return "", fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return path, writeTorchFile(out, format, torchTensors(sd), exportMetadata(meta))
}

// torchTensors converts a state dict to torch's dtypes: float32 for
// parameters and BN statistics, int64 for the batch counters.
func torchTensors(sd []model.NamedTensor) []torchfmt.Tensor {
	out := make([]torchfmt.Tensor, len(sd))
	for i, nt := range sd {
		out[i] = torchfmt.Tensor{Name: nt.Name, DType: torchfmt.F32, Shape: slices.Clone(nt.Shape), F32: nt.Data}
		if nt.Int64 != nil {
			out[i].DType, out[i].F32, out[i].I64 = torchfmt.I64, nil, nt.Int64
		}
	}
	return out
}

// exportMetadata is the string map an export carries (safetensors'
// __metadata__, the .pth file's metadata record): "format" "pt" as Hugging
// Face's loaders expect, the model's shape, and what eval needs to rebuild
// the test set, so an import of the file scores as the original does.
func exportMetadata(meta map[string]any) map[string]string {
	md := map[string]string{"format": "pt", "source": "resnetlab"}
	for _, k := range exportKeys {
		if v, ok := meta[k]; ok {
			md[k] = fmt.Sprint(v)
		}
	}
	md["architecture"] = architecture(md["width"], md["in_channels"], md["num_classes"])
	return md
}

// exportKeys are the checkpoint metadata keys an export carries.
var exportKeys = []string{"epoch", "dataset", "plugin", "precision", "width", "in_channels",
	"num_classes", "synthetic_test", "synthetic_seed"}

// architecture names the model honestly: torchvision's resnet18 only for
// its shape (width 64, 3 input channels), which torchvision can load.
func architecture(width, in, classes string) string {
	if width == "64" && in == "3" {
		return "torchvision resnet18 (num_classes " + classes + ")"
	}
	return fmt.Sprintf("resnet18 (width %s, in_channels %s, num_classes %s)", width, in, classes)
}

// checkNewFile refuses an out that exists (a dangling link too: writing
// through it would create a file elsewhere) or whose directory does not,
// so that nothing is created or replaced but out itself.
func checkNewFile(out string) error {
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("%s already exists; remove it or choose another file name", out)
	}
	dir := filepath.Dir(out)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("export to %s: directory %s does not exist; create it first", out, dir)
	case err != nil:
		return fmt.Errorf("export to %s: %w", out, err)
	case !fi.IsDir():
		return fmt.Errorf("export to %s: %s is not a directory", out, dir)
	}
	return nil
}

// writeTorchFile writes ts to out in format, atomically and never over an
// existing file (fsutil.WriteFileNew): out is absent or whole.
func writeTorchFile(out, format string, ts []torchfmt.Tensor, md map[string]string) error {
	err := fsutil.WriteFileNew(out, func(w io.Writer) error {
		if format == FormatSafetensors {
			return torchfmt.WriteSafetensors(w, ts, md)
		}
		return torchfmt.WritePthMeta(w, ts, md)
	})
	if errors.Is(err, fsutil.ErrExists) {
		return fmt.Errorf("%s already exists; remove it or choose another file name", out)
	}
	return err
}

// ImportOptions says what a file without resnetlab metadata (a plain
// torch.save) cannot: the data set eval scores it on and, for synthetic
// data, the test set's seed and size. A field left zero is taken from the
// file's metadata; what neither gives stays unrecorded, and eval refuses to
// guess it.
type ImportOptions struct {
	Dataset          string
	SynSeed, SynTest int
}

// ImportModel reads a torchvision resnet18 state dict (torch.save archive
// or safetensors; DDP's "module." prefix is dropped) from in and writes it
// as dir's checkpoint of epoch, ready for eval and resume. The model's
// width, input channels and classes come from the shapes of conv1.weight
// and fc.weight. An existing checkpoint of that epoch is not replaced.
func ImportModel(in, dir string, epoch int, opts ImportOptions) error {
	if epoch < 1 {
		return fmt.Errorf("epoch %d, want >= 1", epoch)
	}
	mp, _, _ := ckpt.Paths(dir, epoch)
	if _, err := os.Stat(mp); err == nil {
		return fmt.Errorf("%s already exists; remove it or choose another epoch", mp)
	}
	ts, md, err := torchfmt.ReadFileMeta(in)
	if err != nil {
		return err // names in
	}
	sd, err := fromTorchTensors(ts)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	cfg, err := inferModelConfig(sd)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	meta, err := importMeta(epoch, cfg, md, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	sd, paramLens, err := checkedStateDict(cfg, sd)
	if err != nil {
		return fmt.Errorf("%s: not torchvision's resnet18 (width %d, %d input channels, %d classes): %w",
			in, cfg.Width, cfg.InChannels, cfg.NumClasses, err)
	}
	_, err = ckpt.Save(dir, freshState(sd, paramLens), meta, referenceSched())
	return err
}

// fromTorchTensors converts a read state dict to ours, checking dtypes:
// counters must be int64, everything else a float type (float16 and
// bfloat16 are widened exactly).
func fromTorchTensors(ts []torchfmt.Tensor) ([]model.NamedTensor, error) {
	prefix := wrapperPrefix(ts)
	out := make([]model.NamedTensor, len(ts))
	for i, t := range ts {
		name := strings.TrimPrefix(t.Name, prefix)
		counter := strings.HasSuffix(name, ".num_batches_tracked")
		switch {
		case counter && t.DType != torchfmt.I64:
			return nil, fmt.Errorf("key %q is %s, want an int64 (I64) scalar", t.Name, t.DType)
		case !counter && t.DType == torchfmt.I64:
			return nil, fmt.Errorf("key %q is I64, want a float tensor (F32, F16 or BF16)", t.Name)
		}
		out[i] = model.NamedTensor{Name: name, Shape: t.Shape, Data: t.F32, Int64: t.I64}
	}
	return out, nil
}

// wrapperPrefix is "module." (DistributedDataParallel) or "_orig_mod."
// (torch.compile) when every key carries it, else "".
func wrapperPrefix(ts []torchfmt.Tensor) string {
	for _, p := range []string{"module.", "_orig_mod."} {
		all := len(ts) > 0
		for _, t := range ts {
			all = all && strings.HasPrefix(t.Name, p)
		}
		if all {
			return p
		}
	}
	return ""
}

// inferModelConfig reads width and input channels from conv1.weight
// [width, in, 7, 7] and the class count from fc.weight [classes, 8*width].
func inferModelConfig(sd []model.NamedTensor) (model.Config, error) {
	cfg := model.Config{DType: kernels.F32}
	conv1, fc := findTensor(sd, "conv1.weight"), findTensor(sd, "fc.weight")
	switch {
	case conv1 == nil:
		return cfg, fmt.Errorf("no key \"conv1.weight\" (the stem convolution, shape [width, in_channels, 7, 7]); keys start %s", firstKeys(sd))
	case len(conv1.Shape) != 4 || conv1.Shape[0] < 1 || conv1.Shape[1] < 1 || conv1.Shape[2] != 7 || conv1.Shape[3] != 7:
		return cfg, fmt.Errorf("key \"conv1.weight\" has shape %v, want [width, in_channels, 7, 7]", conv1.Shape)
	case fc == nil:
		return cfg, fmt.Errorf("no key \"fc.weight\" (the classifier, shape [classes, 8*width])")
	case len(fc.Shape) != 2 || fc.Shape[0] < 1:
		return cfg, fmt.Errorf("key \"fc.weight\" has shape %v, want [classes, %d]", fc.Shape, 8*conv1.Shape[0])
	}
	cfg.Width, cfg.InChannels, cfg.NumClasses = conv1.Shape[0], conv1.Shape[1], fc.Shape[0]
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("conv1.weight %v and fc.weight %v imply %w", conv1.Shape, fc.Shape, err)
	}
	if !slices.Contains(ckpt.DatasetClassCounts(), cfg.NumClasses) {
		return cfg, fmt.Errorf("fc.weight %v has %d outputs; the data sets have %s classes",
			fc.Shape, cfg.NumClasses, ckpt.JoinInts(ckpt.DatasetClassCounts()))
	}
	return cfg, nil
}

func findTensor(sd []model.NamedTensor, name string) *model.NamedTensor {
	for i := range sd {
		if sd[i].Name == name {
			return &sd[i]
		}
	}
	return nil
}

// firstKeys quotes up to five keys, to show what a foreign file holds.
func firstKeys(sd []model.NamedTensor) string {
	var ks []string
	for i := 0; i < len(sd) && i < 5; i++ {
		ks = append(ks, strconv.Quote(sd[i].Name))
	}
	if len(sd) > 5 {
		ks = append(ks, "...")
	}
	return "[" + strings.Join(ks, " ") + "]"
}

// importDataset checks the data set the model will be scored on.
func importDataset(name string, cfg model.Config) (string, error) {
	canon, err := data.Canonical(name)
	if err != nil {
		return "", err
	}
	classes := map[string]int{"cifar10": len(data.CIFAR10Classes), "fashion-mnist": len(data.FashionMNISTClasses),
		"synthetic": len(data.SyntheticClasses)}[canon]
	switch {
	case cfg.InChannels != 3 && (canon != "fashion-mnist" || cfg.InChannels != 1):
		return "", fmt.Errorf("conv1.weight takes %d input channels; %s needs 3 (fashion-mnist: 1 or 3)", cfg.InChannels, canon)
	case cfg.NumClasses != classes:
		return "", fmt.Errorf("fc.weight has %d outputs; %s has %d classes", cfg.NumClasses, canon, classes)
	}
	return canon, nil
}

// checkedStateDict loads sd into a CPU model of cfg, which names every
// missing, unexpected or mis-shaped key, and returns the model's state dict
// (torchvision's order, the same values) and the length of each parameter.
func checkedStateDict(cfg model.Config, sd []model.NamedTensor) ([]model.NamedTensor, []int, error) {
	if err := ckpt.CheckStateShapes(cfg, sd); err != nil {
		return nil, nil, err
	}
	m := model.NewResNet18(device.Host(), cfg)
	defer m.Free()
	if err := m.LoadStateDict(sd); err != nil {
		return nil, nil, err
	}
	var lens []int
	for _, p := range m.Params() {
		lens = append(lens, p.W.Len())
	}
	return m.StateDict(), lens, nil
}

// freshState is the training state of a model no optimizer has touched:
// zero Adam moments, step 0, no loss scaler.
func freshState(sd []model.NamedTensor, paramLens []int) *engine.State {
	st := &engine.State{Model: sd}
	for _, n := range paramLens {
		st.ExpAvg = append(st.ExpAvg, make([]float32, n))
		st.ExpAvgSq = append(st.ExpAvgSq, make([]float32, n))
	}
	return st
}

// importMeta describes an imported checkpoint: the flags first, then the
// file's metadata. Step and steps per epoch are 0 (no training position),
// which ckpt.Load reads as a finished epoch, so a run resumes at
// epoch+1. An unknown data set is recorded as "" and an unknown synthetic
// test set as size 0, which eval refuses.
func importMeta(epoch int, cfg model.Config, md map[string]string, o ImportOptions) (ckpt.Meta, error) {
	m := ckpt.Meta{Epoch: epoch, Plugin: "imported", Precision: "fp32", World: 1,
		Width: cfg.Width, InChannels: cfg.InChannels, Classes: cfg.NumClasses,
		Dataset: o.Dataset, SynTest: o.SynTest, SynSeed: o.SynSeed}
	if m.Dataset == "" && md["dataset"] != "" {
		m.Dataset = md["dataset"]
	}
	if m.Dataset != "" {
		canon, err := importDataset(m.Dataset, cfg)
		if err != nil {
			return m, err
		}
		m.Dataset = canon
	}
	if m.SynTest == 0 && md["synthetic_test"] != "" {
		n, err := strconv.Atoi(md["synthetic_test"])
		if err != nil || n < 1 || n > spec.MaxImages {
			return m, fmt.Errorf("metadata synthetic_test %q: want an image count 1..%d", md["synthetic_test"], spec.MaxImages)
		}
		m.SynTest = n
		if o.SynSeed == 0 && md["synthetic_seed"] != "" {
			if m.SynSeed, err = strconv.Atoi(md["synthetic_seed"]); err != nil {
				return m, fmt.Errorf("metadata synthetic_seed %q: want an integer", md["synthetic_seed"])
			}
		}
	}
	return m, nil
}

// referenceSched is the default spec's MultiStepLR, recorded in the
// lr_scheduler file (a resumed run follows its own spec's schedule).
func referenceSched() model.MultiStepLR {
	def := spec.Defaults("", func(string) string { return "" })
	return model.MultiStepLR{Base: def.LR, Milestones: def.Milestones, Gamma: def.Gamma}
}
