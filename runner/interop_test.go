package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"resnetlab/ckpt"
	"resnetlab/engine"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
	"resnetlab/model/torchfmt"
)

// testStateDict is a width-w ResNet-18 state dict whose BN statistics and
// batch counters are not at their initial values, so a lost buffer shows.
func testStateDict(t testing.TB, w int, seed uint64) []model.NamedTensor {
	t.Helper()
	m := model.NewResNet18(cpu.New(), model.Config{Width: w, InChannels: 3, NumClasses: 10, DType: kernels.F32, Seed: seed})
	defer m.Free()
	sd := m.StateDict()
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range sd {
		switch {
		case sd[i].Int64 != nil:
			sd[i].Int64[0] = int64(100 + i)
		case strings.HasSuffix(sd[i].Name, "running_var"):
			for j := range sd[i].Data {
				sd[i].Data[j] = 0.5 + r.Float32()
			}
		case strings.HasSuffix(sd[i].Name, "running_mean"), strings.HasSuffix(sd[i].Name, "bias"):
			for j := range sd[i].Data {
				sd[i].Data[j] = r.Float32() - 0.5
			}
		}
	}
	return sd
}

// writeTestCheckpoint saves sd as dir's checkpoint of epoch with non-zero
// Adam moments, as a trained run would leave it.
func writeTestCheckpoint(t *testing.T, dir string, epoch int, sd []model.NamedTensor, meta ckpt.Meta) {
	t.Helper()
	st := &engine.State{Model: sd, Step: 77}
	for _, n := range paramLens(sd) {
		st.ExpAvg = append(st.ExpAvg, slices.Repeat([]float32{0.25}, n))
		st.ExpAvgSq = append(st.ExpAvgSq, slices.Repeat([]float32{0.5}, n))
	}
	meta.Epoch = epoch
	if _, err := ckpt.Save(dir, st, meta, model.ReferenceSchedule(1e-3)); err != nil {
		t.Fatal(err)
	}
}

func syntheticMeta(w int) ckpt.Meta {
	return ckpt.Meta{Step: 6, StepsPerEpoch: 6, Plugin: "torch_ddp", Precision: "fp32", World: 1,
		Width: w, InChannels: 3, Classes: 10, Dataset: "synthetic", SynTest: 40, SynSeed: 5}
}

func TestExportImportRoundTrip(t *testing.T) {
	sd := testStateDict(t, 4, 11)
	src := t.TempDir()
	writeTestCheckpoint(t, src, 3, sd, syntheticMeta(4))
	for _, name := range []string{"w.safetensors", "w.pth"} {
		out := filepath.Join(t.TempDir(), name)
		if err := ExportModel(src, 0, "", out); err != nil { // 0: the latest, epoch 3
			t.Fatal(err)
		}
		ts, err := torchfmt.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		checkTorchDtypes(t, ts, sd)
		dst := filepath.Join(t.TempDir(), "imported")
		if err := ImportModel(out, dst, 3, ImportOptions{Dataset: "synthetic"}); err != nil {
			t.Fatal(err)
		}
		mp, _, _ := ckpt.Paths(dst, 3)
		meta, mts, err := ckpt.ReadFile(mp, "model")
		if err != nil {
			t.Fatal(err)
		}
		sameStateDict(t, name, ckpt.StateDict(mts), sd)
		if w, _ := ckpt.MetaInt(meta, "width"); w != 4 {
			t.Errorf("%s: imported width %d, want 4", name, w)
		}
		checkFreshOptimizer(t, dst, 3, sd)
		if err := ImportModel(out, dst, 3, ImportOptions{Dataset: "synthetic"}); err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("importing over an existing checkpoint: %v, want an 'already exists' error", err)
		}
	}
}

// checkTorchDtypes checks an exported file against the state dict it
// came from: same keys in order, float32 values, 0-dim int64 counters.
func checkTorchDtypes(t *testing.T, ts []torchfmt.Tensor, sd []model.NamedTensor) {
	t.Helper()
	if len(ts) != len(sd) {
		t.Fatalf("exported %d tensors, want %d", len(ts), len(sd))
	}
	for i, x := range ts {
		want := sd[i]
		wantDT := torchfmt.F32
		if want.Int64 != nil {
			wantDT = torchfmt.I64
		}
		if x.Name != want.Name || x.DType != wantDT || !slices.Equal(x.Shape, want.Shape) ||
			!slices.Equal(x.F32, want.Data) || !slices.Equal(x.I64, want.Int64) {
			t.Fatalf("exported tensor %d: %s %s %v, want %s %s %v (or values differ)",
				i, x.Name, x.DType, x.Shape, want.Name, wantDT, want.Shape)
		}
	}
}

func sameStateDict(t *testing.T, what string, got, want []model.NamedTensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Data, w.Data) || !slices.Equal(g.Int64, w.Int64) {
			t.Fatalf("%s: tensor %d is %s %v, want %s %v with identical values", what, i, g.Name, g.Shape, w.Name, w.Shape)
		}
	}
}

// checkFreshOptimizer reads the imported checkpoint the way resume does:
// one zero moment pair per parameter, step 0, no scaler.
func checkFreshOptimizer(t *testing.T, dir string, epoch int, sd []model.NamedTensor) {
	t.Helper()
	lc, err := ckpt.Load(dir, ckpt.Ref{Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	lens := paramLens(sd)
	st := lc.State
	if st.Step != 0 || st.Scaler != nil || len(st.ExpAvg) != len(lens) || len(st.ExpAvgSq) != len(lens) {
		t.Fatalf("optimizer: step %d scaler %v, %d/%d moments, want step 0, none, %d", st.Step, st.Scaler,
			len(st.ExpAvg), len(st.ExpAvgSq), len(lens))
	}
	for i, n := range lens {
		zero := make([]float32, n)
		if !slices.Equal(st.ExpAvg[i], zero) || !slices.Equal(st.ExpAvgSq[i], zero) {
			t.Fatalf("moment %d is not %d zeros", i, n)
		}
	}
	if lc.Epoch != epoch || lc.Step < lc.StepsPerEpoch {
		t.Fatalf("position: epoch %d step %d/%d, want a finished epoch %d", lc.Epoch, lc.Step, lc.StepsPerEpoch, epoch)
	}
}

// torchvisionShape is resnet18(num_classes=10)'s shape for key, worked out
// from the architecture independently of package model.
func torchvisionShape(key string) []int {
	if strings.HasSuffix(key, "num_batches_tracked") {
		return []int{}
	}
	var layer, block int
	var rest string
	if n, _ := fmt.Sscanf(key, "layer%d.%d.%s", &layer, &block, &rest); n < 3 {
		switch key {
		case "conv1.weight":
			return []int{64, 3, 7, 7}
		case "fc.weight":
			return []int{10, 512}
		case "fc.bias":
			return []int{10}
		}
		return []int{64} // bn1
	}
	out := 64 << (layer - 1)
	in := out
	if block == 0 && layer > 1 {
		in = out / 2
	}
	switch rest {
	case "conv1.weight":
		return []int{out, in, 3, 3}
	case "conv2.weight":
		return []int{out, out, 3, 3}
	case "downsample.0.weight":
		return []int{out, in, 1, 1}
	}
	return []int{out}
}

func TestExportKeysMatchTorchvision(t *testing.T) {
	m := model.NewResNet18(cpu.New(), model.DefaultConfig())
	sd := m.StateDict()
	m.Free()
	ts := torchTensors(sd)
	names := make([]string, len(ts))
	params := 0
	for i, x := range ts {
		names[i] = x.Name
		if want := torchvisionShape(x.Name); !slices.Equal(x.Shape, want) {
			t.Errorf("%s: shape %v, torchvision has %v", x.Name, x.Shape, want)
		}
		wantDT := torchfmt.F32
		if strings.HasSuffix(x.Name, "num_batches_tracked") {
			wantDT = torchfmt.I64
		}
		if x.DType != wantDT || x.Numel() != len(x.F32)+len(x.I64) {
			t.Errorf("%s: dtype %s with %d+%d values, want %s with %d", x.Name, x.DType, len(x.F32), len(x.I64), wantDT, x.Numel())
		}
		if !strings.Contains(x.Name, "running_") && wantDT == torchfmt.F32 {
			params += x.Numel()
		}
	}
	if want := torchfmt.TorchvisionResNet18Keys(); !slices.Equal(names, want) {
		t.Fatalf("keys differ from torchvision's:\n got %v\nwant %v", names, want)
	}
	// sum(p.numel() for p in torchvision.models.resnet18(num_classes=10).parameters())
	if params != 11181642 {
		t.Fatalf("%d parameters, torchvision's resnet18(num_classes=10) has 11181642", params)
	}
}

// writeTorch writes a state dict for import tests, letting edit change it.
func writeTorch(t *testing.T, name string, edit func([]torchfmt.Tensor) []torchfmt.Tensor) string {
	t.Helper()
	ts := edit(torchTensors(testStateDict(t, 2, 3)))
	path := filepath.Join(t.TempDir(), name)
	if err := torchfmt.WriteFile(path, ts); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestImportErrorsNameTheKey(t *testing.T) {
	drop := func(key string) func([]torchfmt.Tensor) []torchfmt.Tensor {
		return func(ts []torchfmt.Tensor) []torchfmt.Tensor {
			return slices.DeleteFunc(ts, func(x torchfmt.Tensor) bool { return x.Name == key })
		}
	}
	set := func(key string, f func(*torchfmt.Tensor)) func([]torchfmt.Tensor) []torchfmt.Tensor {
		return func(ts []torchfmt.Tensor) []torchfmt.Tensor {
			for i := range ts {
				if ts[i].Name == key {
					f(&ts[i])
				}
			}
			return ts
		}
	}
	cases := []struct {
		name, dataset string
		edit          func([]torchfmt.Tensor) []torchfmt.Tensor
		want          []string
	}{
		{"missing", "", drop("layer3.1.bn2.running_var"), []string{`missing key "layer3.1.bn2.running_var"`}},
		{"two missing", "", func(ts []torchfmt.Tensor) []torchfmt.Tensor {
			return drop("fc.bias")(drop("layer1.0.conv2.weight")(ts))
		}, []string{`"fc.bias"`, `"layer1.0.conv2.weight"`}},
		{"extra", "", func(ts []torchfmt.Tensor) []torchfmt.Tensor {
			return append(ts, torchfmt.Tensor{Name: "head.weight", DType: torchfmt.F32, Shape: []int{2}, F32: []float32{1, 2}})
		}, []string{`unexpected key "head.weight"`}},
		{"shape", "", set("layer2.0.downsample.0.weight", func(x *torchfmt.Tensor) {
			x.Shape = []int{x.Shape[0], x.Shape[1], 1, 1, 1}
		}), []string{`"layer2.0.downsample.0.weight"`, "shape"}},
		{"counter dtype", "", set("bn1.num_batches_tracked", func(x *torchfmt.Tensor) {
			x.DType, x.F32, x.I64 = torchfmt.F32, []float32{1}, nil
		}), []string{`"bn1.num_batches_tracked"`, "int64"}},
		{"weight dtype", "", set("fc.bias", func(x *torchfmt.Tensor) {
			x.DType, x.I64, x.F32 = torchfmt.I64, make([]int64, len(x.F32)), nil
		}), []string{`"fc.bias"`, "float"}},
		{"no stem", "", drop("conv1.weight"), []string{`"conv1.weight"`}},
		{"classes", "cifar10", set("fc.weight", func(x *torchfmt.Tensor) {
			x.Shape, x.F32 = []int{7, x.Shape[1]}, x.F32[:7*x.Shape[1]]
		}), []string{"fc.weight", "7 outputs", "10 classes"}},
		{"dataset", "mnist", func(ts []torchfmt.Tensor) []torchfmt.Tensor { return ts }, []string{`"mnist"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := writeTorch(t, "in.safetensors", c.edit)
			dir := filepath.Join(t.TempDir(), "ckpt")
			err := ImportModel(in, dir, 1, ImportOptions{Dataset: c.dataset})
			if err == nil {
				t.Fatal("import succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			if _, serr := os.Stat(dir); serr == nil {
				t.Errorf("a failed import created %s", dir)
			}
		})
	}
}

// A DistributedDataParallel state dict (keys "module.conv1.weight", ...)
// imports as the plain model.
func TestImportStripsDDPPrefix(t *testing.T) {
	in := writeTorch(t, "ddp.pth", func(ts []torchfmt.Tensor) []torchfmt.Tensor {
		for i := range ts {
			ts[i].Name = "module." + ts[i].Name
		}
		return ts
	})
	dir := t.TempDir()
	if err := ImportModel(in, dir, 2, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	meta, ts, err := ckpt.ReadFile(filepath.Join(dir, "model_2.pth"), "model")
	if err != nil {
		t.Fatal(err)
	}
	sameStateDict(t, "ddp import", ckpt.StateDict(ts), testStateDict(t, 2, 3))
	if ds, _ := ckpt.MetaString(meta, "dataset"); ds != "" {
		t.Fatalf("data set of a file without metadata, no --dataset: %q, want none recorded", ds)
	}
}

// float16 and bfloat16 files import with their values widened exactly.
func TestImportHalfPrecision(t *testing.T) {
	in := writeTorch(t, "half.safetensors", func(ts []torchfmt.Tensor) []torchfmt.Tensor {
		for i := range ts {
			if ts[i].DType == torchfmt.F32 {
				ts[i].DType = []string{torchfmt.F16, torchfmt.BF16}[i%2]
			}
		}
		return ts
	})
	want, err := torchfmt.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ImportModel(in, dir, 1, ImportOptions{Dataset: "synthetic"}); err != nil {
		t.Fatal(err)
	}
	_, ts, err := ckpt.ReadFile(filepath.Join(dir, "model_1.pth"), "model")
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range ts {
		if x.DType != ckpt.DTypeF32 && x.DType != ckpt.DTypeI64 || !slices.Equal(x.F32, want[i].F32) {
			t.Fatalf("%s: stored as %s, values equal: %v", x.Name, x.DType, slices.Equal(x.F32, want[i].F32))
		}
	}
}

func TestExportFormat(t *testing.T) {
	for _, c := range []struct{ format, out, want string }{
		{"", "a.safetensors", FormatSafetensors}, {"", "a.pth", FormatPth}, {"", "a.PT", FormatPth},
		{"pth", "weights", FormatPth}, {"", "weights", ""}, {"onnx", "a.pth", ""},
		{"safetensors", "a.bin", FormatSafetensors}, {"pth", "a.bin", FormatPth}, {"", "a.bin", FormatPth},
		{"pth", "a.pth", FormatPth}, {"safetensors", "a.SafeTensors", FormatSafetensors},
		// a format the extension contradicts would write a file that lies
		{"safetensors", "a.pth", ""}, {"safetensors", "a.pt", ""}, {"pth", "a.safetensors", ""},
	} {
		got, err := ExportFormat(c.format, c.out)
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("ExportFormat(%q, %q) = %q, %v; want %q", c.format, c.out, got, err, c.want)
		}
	}
	_, err := ExportFormat("pth", "m.safetensors")
	if want := `export to m.safetensors: format pth, but the extension ".safetensors" says safetensors; ` +
		"drop the format or name the file .pth"; err == nil || err.Error() != want {
		t.Errorf("contradiction: %v, want %q", err, want)
	}
	// An explicit format where the extension names none: safetensors bytes in a .bin.
	sd := testStateDict(t, 2, 9)
	src := t.TempDir()
	writeTestCheckpoint(t, src, 1, sd, syntheticMeta(2))
	out := filepath.Join(t.TempDir(), "x.bin")
	if err := ExportModel(src, 1, FormatSafetensors, out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	ts, _, err := torchfmt.ReadSafetensors(f, st.Size())
	if err != nil {
		t.Fatalf("--format safetensors to %s: %v", out, err)
	}
	checkTorchDtypes(t, ts, sd)
}

// Scoring the imported copy of a trained model gives exactly the
// original's accuracies, overall and per class.
func TestImportedEvalMatchesOriginal(t *testing.T) {
	s := tinySpec(t, "")
	if _, err := collect(t, s, RunOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	src := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
	out := filepath.Join(t.TempDir(), "m.safetensors")
	if err := ExportModel(src, 2, "", out); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := ImportModel(out, dst, 2, ImportOptions{Dataset: "synthetic"}); err != nil {
		t.Fatal(err)
	}
	eval := func(dir string) (float64, []float64) {
		acc, per, err := Eval(context.Background(), EvalOptions{CheckpointDir: dir, Epoch: 2, Device: "cpu", Spec: s})
		if err != nil {
			t.Fatal(err)
		}
		return acc, per
	}
	a0, p0 := eval(src)
	a1, p1 := eval(dst)
	if a0 != a1 || !slices.Equal(p0, p1) {
		t.Fatalf("imported: %v %v, original: %v %v", a1, p1, a0, p0)
	}
}

// A run resumed from an imported checkpoint trains exactly as one resumed
// from the original with a fresh optimizer: the import carries every
// weight and buffer, and resume accepts its files.
func TestRunResumesFromImport(t *testing.T) {
	sd := testStateDict(t, 4, 5)
	var want string
	for _, imported := range []bool{false, true} {
		s := tinySpec(t, "")
		dir := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
		if imported {
			tmp := t.TempDir()
			writeTestCheckpoint(t, tmp, 1, sd, syntheticMeta(4))
			out := filepath.Join(tmp, "w.pth")
			if err := ExportModel(tmp, 1, "", out); err != nil {
				t.Fatal(err)
			}
			if err := ImportModel(out, dir, 1, ImportOptions{Dataset: "synthetic"}); err != nil {
				t.Fatal(err)
			}
		} else {
			fresh := freshState(sd, paramLens(sd))
			if _, err := ckpt.Save(dir, fresh, ckpt.Meta{Epoch: 1, Step: 6, StepsPerEpoch: 6, Width: 4,
				InChannels: 3, Classes: 10, Dataset: "synthetic"}, model.ReferenceSchedule(1e-3)); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := collect(t, s, RunOptions{Resume: ckpt.Ref{Epoch: 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := finished(t, evs)[0]
		if r.Status != "done" || len(r.EpochResults) != 1 {
			t.Fatalf("imported=%v: status %s, %d epochs trained, want done after 1", imported, r.Status, len(r.EpochResults))
		}
		if imported && r.ModelSHA256 != want {
			t.Fatalf("resumed from the import: model %s, from the original: %s", r.ModelSHA256, want)
		}
		want = r.ModelSHA256
	}
}

// paramLens lists the parameters' sizes: every float entry but BN statistics.
func paramLens(sd []model.NamedTensor) []int {
	var lens []int
	for _, nt := range sd {
		if nt.Int64 == nil && !strings.Contains(nt.Name, "running_") {
			lens = append(lens, len(nt.Data))
		}
	}
	return lens
}

// An export carries what eval needs: an import with no flags scores the
// same test set, so the same accuracy, as the original checkpoint.
func TestExportImportEvalSameAccuracy(t *testing.T) {
	src := t.TempDir()
	writeTestCheckpoint(t, src, 2, testStateDict(t, 4, 13), syntheticMeta(4))
	want, _, err := Eval(context.Background(), EvalOptions{CheckpointDir: src, Epoch: 2, Device: "cpu", BatchSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"w.safetensors", "w.pth"} {
		out := filepath.Join(t.TempDir(), name)
		if err := ExportModel(src, 2, "", out); err != nil {
			t.Fatal(err)
		}
		dst := t.TempDir()
		if err := ImportModel(out, dst, 1, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		mp, _, _ := ckpt.Paths(dst, 1)
		_, meta, _ := ckpt.ReadMeta(mp)
		if n, _ := ckpt.MetaInt(meta, "synthetic_test"); n != 40 {
			t.Errorf("%s: imported synthetic_test %d, want 40", name, n)
		}
		if n, _ := ckpt.MetaInt(meta, "synthetic_seed"); n != 5 {
			t.Errorf("%s: imported synthetic_seed %d, want 5", name, n)
		}
		got, _, err := Eval(context.Background(), EvalOptions{CheckpointDir: dst, Epoch: 1, Device: "cpu", BatchSize: 20})
		if err != nil || got != want {
			t.Errorf("%s: imported model scores %v (%v), the original %v", name, got, err, want)
		}
	}
}

// A file without resnetlab metadata (a plain torch.save) imported with no
// flags: eval refuses, naming what is missing, instead of guessing.
func TestEvalRefusesImportWithoutMetadata(t *testing.T) {
	sd := testStateDict(t, 4, 17)
	in := filepath.Join(t.TempDir(), "plain.pth")
	if err := torchfmt.WriteFile(in, torchTensors(sd)); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := ImportModel(in, dst, 1, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _, err := Eval(context.Background(), EvalOptions{CheckpointDir: dst, Epoch: 1, Device: "cpu"})
	if err == nil || !strings.Contains(err.Error(), "records no dataset") {
		t.Fatalf("eval of an import without metadata: %v, want an error naming the missing dataset", err)
	}
	if err := ImportModel(in, t.TempDir(), 1, ImportOptions{Dataset: "synthetic"}); err != nil {
		t.Fatal(err)
	}
	dst2 := t.TempDir()
	ImportModel(in, dst2, 1, ImportOptions{Dataset: "synthetic"})
	_, _, err = Eval(context.Background(), EvalOptions{CheckpointDir: dst2, Epoch: 1, Device: "cpu"})
	if err == nil || !strings.Contains(err.Error(), "synthetic_test") {
		t.Fatalf("eval of a synthetic import without its test set: %v, want an error naming synthetic_test", err)
	}
}
