package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/runner"
)

// saveCheckpoint writes the three files of one epoch.
func saveCheckpoint(t *testing.T, dir string, epoch int, meta map[string]any) {
	t.Helper()
	m, o, s := ckpt.Paths(dir, epoch)
	for _, p := range []string{m, o, s} {
		if err := ckpt.WriteFile(p, "model", meta, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEval(t *testing.T) {
	dir := t.TempDir()
	saveCheckpoint(t, dir, 5, map[string]any{"dataset": "cifar10"})
	saveCheckpoint(t, dir, 10, map[string]any{"dataset": "cifar10"})
	c, out, errb := testCLI()
	var got runner.EvalOptions
	perClass := []float64{0.9, 0.95, 0.7, 0.6, 0.8, 0.75, 0.88, 0.9, 0.93, 0.91}
	c.eval = func(_ context.Context, o runner.EvalOptions) (float64, []float64, error) {
		got = o
		return 0.85123, perClass, nil
	}
	if code := runCLI(c, "eval", "-c", dir); code != exitOK {
		t.Fatalf("code %d: %s", code, errb)
	}
	want := runner.EvalOptions{CheckpointDir: dir, Epoch: 10, Dataset: "cifar10", Device: "auto", BatchSize: 128}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("options %+v, want %+v", got, want)
	}
	lines := strings.Split(out.String(), "\n")
	if lines[0] != "Accuracy of the model on the test images: 85.12 %" ||
		lines[1] != "  airplane      90.00 %" || lines[10] != "  truck         91.00 %" ||
		lines[11] != "scored "+filepath.Join(dir, "model_10.pth")+" (epoch 10) on cifar10" {
		t.Fatalf("output:\n%s", out)
	}

	spec := writeSpec(t, "dataset = \"synthetic\"\ndata_dir = \"/d\"\n")
	c, out, _ = testCLI()
	c.eval = func(_ context.Context, o runner.EvalOptions) (float64, []float64, error) {
		got = o
		return 0.5, []float64{1, 0}, nil
	}
	if code := runCLI(c, "eval", "--checkpoint", dir, "--epoch", "5", "--spec", spec, "--batch", "64", "--device", "cpu"); code != exitOK {
		t.Fatalf("code %d", code)
	}
	if got.Epoch != 5 || got.Dataset != "synthetic" || got.DataDir != "/d" || got.Spec == nil ||
		got.BatchSize != 64 || got.Device != "cpu" || !strings.Contains(out.String(), "  class 1        0.00 %") {
		t.Fatalf("options %+v, output %q", got, out)
	}
}

func TestEvalErrors(t *testing.T) {
	empty := t.TempDir()
	cases := []struct {
		args []string
		code int
		frag string
	}{
		{[]string{"eval"}, exitUsage, "missing -c DIR"},
		{[]string{"eval", "-c", empty, "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"eval", "-c", empty, "-e", "-1"}, exitUsage, `-e "-1": want an epoch E or E@S (a checkpoint of ` + empty + ")"},
		{[]string{"eval", "-c", empty, "--dataset", "mnist"}, exitUsage, `--dataset "mnist"`},
		{[]string{"eval", "-c", empty, "--device", "gpu"}, exitUsage, `--device "gpu": want "auto", "cpu" or "cuda"`},
		{[]string{"eval", "-c", empty, "--batch", "0"}, exitUsage, "--batch 0"},
		{[]string{"eval", "-c", empty}, exitFailed, "no complete checkpoint"},
		{[]string{"eval", "-c", filepath.Join(empty, "none")}, exitFailed, "no such file or directory"},
		{[]string{"eval", "-c", empty, "-e", "3"}, exitFailed, "-e 3: no " + filepath.Join(empty, "model_3.pth") + ", and " + empty + " holds no complete checkpoint"},
	}
	for _, tc := range cases {
		c, _, errb := testCLI()
		if code := runCLI(c, tc.args...); code != tc.code || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%v: code %d (want %d), stderr %q (want %q)", tc.args, code, tc.code, errb.String(), tc.frag)
		}
	}
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	a := &report.Result{Run: "gemini-fp16-1", Spec: "zero", Plugin: "gemini", Precision: "fp16", WorldSize: 1,
		Epochs: 80, Status: "done"}
	b := &report.Result{Run: "torch_ddp-fp32-1", Spec: "zero", Plugin: "torch_ddp", Precision: "fp32", WorldSize: 1,
		Epochs: 80, Status: "done"}
	for _, r := range []*report.Result{a, b} {
		if err := report.WriteResult(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	want := report.CompareTable([]*report.Result{a, b})
	for _, args := range [][]string{{"compare", dir}, {"compare", report.ResultPath(dir, a), report.ResultPath(dir, b)}} {
		c, out, errb := testCLI()
		if code := runCLI(c, args...); code != exitOK || out.String() != want {
			t.Fatalf("%v: code %d, stdout\n%s\nstderr %s", args, code, out, errb)
		}
	}
	// On a terminal of 80 columns, the table fitted to it.
	c, out, errb := testCLI()
	c.width = func(io.Writer) int { return 80 }
	if code := runCLI(c, "compare", dir); code != exitOK || out.String() != report.CompareTableWidth([]*report.Result{a, b}, 80) ||
		out.String() == want {
		t.Fatalf("80 columns: code %d, stdout\n%s\nstderr %s", code, out, errb)
	}
	c, out, errb = testCLI()
	missing := filepath.Join(dir, "missing.json")
	if code := runCLI(c, "compare", report.ResultPath(dir, a), missing); code != exitFailed ||
		!strings.Contains(out.String(), "gemini-fp16-1") || !strings.Contains(errb.String(), missing) {
		t.Fatalf("missing file: %d %q %q", code, out, errb)
	}
	c, _, errb = testCLI()
	if code := runCLI(c, "compare"); code != exitUsage || !strings.Contains(errb.String(), "at least one") {
		t.Fatalf("no args: %d %q", code, errb)
	}
	c, _, errb = testCLI()
	if code := runCLI(c, "compare", t.TempDir()); code != exitFailed || !strings.Contains(errb.String(), "no *.json") {
		t.Fatalf("empty dir: %d %q", code, errb)
	}
}

func TestDataFetch(t *testing.T) {
	c, out, _ := testCLI()
	var gotName, gotRoot string
	var gotNamed bool
	c.fetch = func(_ context.Context, name, root string, named bool, logf func(string, ...any)) error {
		gotName, gotRoot, gotNamed = name, root, named
		logf("downloaded %s", name)
		return nil
	}
	if code := runCLI(c, "data", "fetch", "CIFAR-10", "--root", "/ds"); code != exitOK ||
		gotName != "cifar10" || gotRoot != "/ds" || !gotNamed || out.String() != "downloaded cifar10\n" {
		t.Fatalf("code %d name %q root %q named %v out %q", code, gotName, gotRoot, gotNamed, out)
	}
	t.Setenv("DATA", "/from-env")
	c, _, errb := testCLI()
	c.fetch = func(_ context.Context, name, root string, named bool, _ func(string, ...any)) error {
		gotRoot, gotNamed = root, named
		return errors.New("no network")
	}
	if code := runCLI(c, "data", "fetch", "fmnist"); code != exitFailed || gotRoot != "/from-env" || gotNamed ||
		!strings.Contains(errb.String(), "resnetlab data fetch fashion-mnist: no network") {
		t.Fatalf("code %d root %q named %v stderr %q", code, gotRoot, gotNamed, errb.String())
	}
	for _, tc := range []struct {
		args []string
		frag string
	}{
		{[]string{"data"}, "missing subcommand"},
		{[]string{"data", "get", "cifar10"}, `unknown subcommand "get"`},
		{[]string{"data", "fetch"}, "got 0 arguments"},
		{[]string{"data", "fetch", "imagenet"}, `unknown data set "imagenet"`},
	} {
		c, _, errb := testCLI()
		if code := runCLI(c, tc.args...); code != exitUsage || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%v: code %d, stderr %q", tc.args, code, errb)
		}
	}
}

func TestParseArgsInterleavedAndDashDash(t *testing.T) {
	c, _, _ := testCLI()
	fs := newFlags("x")
	v := fs.Bool("v", false, "")
	n := fs.Int("n", 0, "")
	pos, done, _ := c.parseArgs(fs, "", []string{"a", "-v", "b", "-n", "3", "--", "-c", "d"})
	if done || !*v || *n != 3 || !reflect.DeepEqual(pos, []string{"a", "b", "-c", "d"}) {
		t.Fatalf("pos %v v %v n %v done %v", pos, *v, *n, done)
	}
}
