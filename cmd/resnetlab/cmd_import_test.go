package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"resnetlab/ckpt"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
	"resnetlab/model/torchfmt"
)

// torchStateDict is a width-2 resnet18 state dict as torch would save it.
func torchStateDict(t *testing.T) []torchfmt.Tensor {
	t.Helper()
	m := model.NewResNet18(cpu.New(), model.Config{Width: 2, InChannels: 1, NumClasses: 10, DType: kernels.F32, Seed: 4})
	defer m.Free()
	var ts []torchfmt.Tensor
	for i, nt := range m.StateDict() {
		x := torchfmt.Tensor{Name: nt.Name, DType: torchfmt.F32, Shape: nt.Shape, F32: nt.Data}
		if nt.Int64 != nil {
			x.DType, x.F32, x.I64 = torchfmt.I64, nil, []int64{int64(i)}
		}
		ts = append(ts, x)
	}
	return ts
}

// import then export through the command line gives the file's tensors back.
func TestImportExportCommands(t *testing.T) {
	want := torchStateDict(t)
	tmp := t.TempDir()
	in := filepath.Join(tmp, "torch.pth")
	if err := torchfmt.WriteFile(in, want); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "ckpt")
	c, out, errb := testCLI()
	if code := runCLI(c, "import", in, "-o", dir, "-e", "4", "--dataset", "fashion-mnist"); code != exitOK {
		t.Fatalf("import: code %d: %s", code, errb)
	}
	if !strings.Contains(out.String(), "resnetlab eval -c "+dir+" -e 4") {
		t.Fatalf("import output %q does not say how to score it", out)
	}
	mp, _, _ := ckpt.Paths(dir, 4)
	_, meta, err := ckpt.ReadMeta(mp)
	if err != nil || meta["dataset"] != "fashion-mnist" || meta["in_channels"] != 1.0 {
		t.Fatalf("imported metadata %v (%v), want fashion-mnist with 1 input channel", meta, err)
	}
	for _, f := range []struct{ name, format string }{{"a.safetensors", ""}, {"b.pt", ""}, {"c.bin", "safetensors"}} {
		exp := filepath.Join(tmp, f.name)
		args := []string{"export", "--checkpoint", dir, "-o", exp}
		if f.format != "" {
			args = append(args, "--format", f.format)
		}
		c, out, errb := testCLI()
		if code := runCLI(c, args...); code != exitOK {
			t.Fatalf("%v: code %d: %s", args, code, errb)
		}
		got, err := torchfmt.ReadFile(exp)
		if err != nil {
			t.Fatal(err)
		}
		if !sameTensors(got, want) {
			t.Fatalf("%s: exported tensors differ from the imported file", f.name)
		}
		if !strings.HasPrefix(out.String(), "wrote "+exp) {
			t.Errorf("export output %q", out)
		}
	}
}

func sameTensors(a, b []torchfmt.Tensor) bool {
	return slices.EqualFunc(a, b, func(x, y torchfmt.Tensor) bool {
		return x.Name == y.Name && x.DType == y.DType && slices.Equal(x.Shape, y.Shape) &&
			slices.Equal(x.F32, y.F32) && slices.Equal(x.I64, y.I64)
	})
}

func TestInteropArgErrors(t *testing.T) {
	tmp := t.TempDir()
	notTorch := filepath.Join(tmp, "spec.toml")
	cases := []struct {
		args []string
		code int
		frag string
	}{
		{[]string{"export", "-o", "x.pth"}, exitUsage, "missing -c DIR"},
		{[]string{"export", "-c", tmp}, exitUsage, "missing -o FILE"},
		{[]string{"export", "-c", tmp, "-o", "x.pth", "y"}, exitUsage, `unexpected argument "y"`},
		{[]string{"export", "-c", tmp, "-o", "x.onnx"}, exitUsage, `extension ".onnx"`},
		{[]string{"export", "-c", tmp, "-o", "x.pth", "--format", "onnx"}, exitUsage, `format "onnx"`},
		{[]string{"export", "-c", tmp, "-o", "x.pth", "-e", "-2"}, exitUsage, `-e "-2": want an epoch E or E@S (a checkpoint of ` + tmp + ")"},
		{[]string{"export", "-c", tmp, "-o", filepath.Join(tmp, "x.pth")}, exitFailed, "no complete checkpoint"},
		{[]string{"export", "-c", tmp, "-e", "3", "-o", filepath.Join(tmp, "x.pth")}, exitFailed,
			"-e 3: no " + filepath.Join(tmp, "model_3.pth") + ", and " + tmp + " holds no complete checkpoint"},
		{[]string{"import", "-o", tmp}, exitUsage, "missing FILE"},
		{[]string{"import", "a.pth", "b.pth", "-o", tmp}, exitUsage, `unexpected argument "b.pth"`},
		{[]string{"import", "a.pth"}, exitUsage, "missing -o DIR"},
		{[]string{"import", "a.pth", "-o", tmp, "-e", "0"}, exitUsage, "-e 0"},
		{[]string{"import", "a.pth", "-o", tmp, "--dataset", "mnist"}, exitUsage, `--dataset "mnist"`},
		{[]string{"import", notTorch, "-o", tmp}, exitFailed, notTorch},
	}
	if err := os.WriteFile(notTorch, []byte("name = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		c, _, errb := testCLI()
		if code := runCLI(c, tc.args...); code != tc.code || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%v: code %d, stderr %q; want code %d mentioning %q", tc.args, code, errb, tc.code, tc.frag)
		}
	}
}

// export refuses, in one line naming the path and before touching the
// disk, a missing directory (created by nothing), an existing file (left
// as it was) and a --format the extension contradicts.
func TestExportRefusals(t *testing.T) {
	tmp := t.TempDir()
	in := filepath.Join(tmp, "torch.pth")
	if err := torchfmt.WriteFile(in, torchStateDict(t)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "ckpt")
	if c, _, errb := testCLI(); runCLI(c, "import", in, "-o", dir, "--dataset", "fashion-mnist") != exitOK {
		t.Fatalf("import: %s", errb)
	}
	missing := filepath.Join(tmp, "nonexist", "dir")
	cases := []struct {
		args []string
		code int
		line string
	}{
		{[]string{"-e", "1", "-o", filepath.Join(missing, "m.safetensors")}, exitFailed, "resnetlab export: export to " +
			filepath.Join(missing, "m.safetensors") + ": directory " + missing + " does not exist; create it first"},
		{[]string{"-o", in}, exitFailed, "resnetlab export: " + in + " already exists; remove it or choose another file name"},
		{[]string{"--format", "pth", "-o", filepath.Join(tmp, "m.safetensors")}, exitUsage, "resnetlab export: export to " +
			filepath.Join(tmp, "m.safetensors") + `: format pth, but the extension ".safetensors" says safetensors; drop the format or name the file .pth`},
	}
	before, _ := os.ReadFile(in)
	for _, tc := range cases {
		c, out, errb := testCLI()
		code := runCLI(c, append([]string{"export", "-c", dir}, tc.args...)...)
		if first, _, _ := strings.Cut(errb.String(), "\n"); code != tc.code || first != tc.line || out.Len() > 0 {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want code %d and %q", tc.args, code, out, errb, tc.code, tc.line)
		}
	}
	if after, _ := os.ReadFile(in); !slices.Equal(after, before) {
		t.Error("export changed the existing file")
	}
	if names, _ := os.ReadDir(tmp); len(names) != 2 { // torch.pth and ckpt
		t.Errorf("export left %v in %s", names, tmp)
	}
}

// import of a file cut short says so in one line naming the file, with
// the sizes, and writes no checkpoint.
func TestImportTruncatedFile(t *testing.T) {
	tmp := t.TempDir()
	for _, name := range []string{"cut.safetensors", "cut.pth"} {
		full := filepath.Join(tmp, "full-"+name)
		if err := torchfmt.WriteFile(full, torchStateDict(t)); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(full)
		in := filepath.Join(tmp, name)
		if err := os.WriteFile(in, b[:800], 0o644); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(tmp, "ckpt")
		c, _, errb := testCLI()
		code := runCLI(c, "import", in, "-o", dir)
		if msg := errb.String(); code != exitFailed || !strings.HasPrefix(msg, "resnetlab import: "+in+": ") ||
			!strings.Contains(msg, "truncated") || !strings.Contains(msg, "800") || strings.Count(msg, "\n") != 1 {
			t.Errorf("%s: code %d, stderr %q; want one line naming it, 'truncated' and its 800 bytes", name, code, msg)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s: import created %s", name, dir)
		}
	}
}
