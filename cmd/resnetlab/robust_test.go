package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"resnetlab/ckpt"
	"resnetlab/runner"
	"resnetlab/spec"
)

// realCLI is a CLI whose run really trains (runner.RunSpec) and really
// checks its paths; it has no UI and no terminal.
func realCLI() (*cli, *bytes.Buffer, *bytes.Buffer) {
	c, out, errb := testCLI()
	c.runSpec = runner.RunSpec
	c.checkPaths = checkPaths
	return c, out, errb
}

// notADir is a path below a regular file: no user, root included, can
// create it.
func notADir(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(f, "sub")
}

// tinyRun is a synthetic spec that trains in well under a second.
func tinyRun(dir, extra string) string {
	return fmt.Sprintf("name = \"t\"\ndataset = \"synthetic\"\nwidth = 4\nepochs = 2\nbatch_size = 20\ndevice = \"cpu\"\n"+
		"eval_every = 0\ncheckpoint = %q\nresults_dir = %q\ninterval = 1\n%s\n[synthetic]\ntrain = 60\ntest = 20\n",
		filepath.Join(dir, "ck"), filepath.Join(dir, "res"), extra)
}

// replaceDir swaps a quoted path of a spec for another.
func replaceDir(src, old, new string) string {
	return strings.Replace(src, fmt.Sprintf("%q", old), fmt.Sprintf("%q", new), 1)
}

func TestRunRefusesPathsItCannotUse(t *testing.T) {
	bad := notADir(t)
	file := filepath.Dir(bad) // what mkdir trips over
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	for _, e := range []int{1, 2} { // a run with checkpoints of epochs 1 and 2
		m, o, s := ckpt.Paths(ck, e)
		for _, p := range []string{m, o, s} {
			if err := ckpt.WriteFile(p, "model", nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	base := tinyRun(dir, "")
	longer := strings.Replace(base, "epochs = 2", "epochs = 4", 1)
	cases := []struct {
		name string
		args []string
		frag string
	}{
		{"checkpoint", []string{"run", writeSpec(t, replaceDir(base, ck, bad+"/{plugin}"))},
			fmt.Sprintf("exp.toml:8: key `checkpoint`: run torch_ddp-fp32-1 cannot write checkpoints in %q: %s is not a directory",
				bad+"/torch_ddp", file)},
		{"results key", []string{"run", writeSpec(t, replaceDir(base, filepath.Join(dir, "res"), bad))},
			fmt.Sprintf("exp.toml:9: key `results_dir`: cannot write results in %q: %s is not a directory", bad, file)},
		{"results flag", []string{"run", "--results", bad, writeSpec(t, base)},
			fmt.Sprintf("resnetlab run: --results: cannot write results in %q: %s is not a directory", bad, file)},
		{"resume key", []string{"run", writeSpec(t, strings.Replace(longer, "interval = 1", "interval = 1\nresume = 3", 1))},
			fmt.Sprintf("exp.toml:11: key `resume`: run torch_ddp-fp32-1: no checkpoint of epoch 3 in %q (checkpoints there: 1, 2)", ck)},
		{"resume flag, no dir", []string{"run", "--resume", "1", writeSpec(t, tinyRun(t.TempDir(), ""))},
			"resnetlab run: --resume 1: run torch_ddp-fp32-1 has no checkpoint directory"},
	}
	for _, tc := range cases {
		c, _, errb := realCLI()
		c.runSpec = func(context.Context, *spec.Spec, runner.RunOptions, chan<- runner.Event, <-chan runner.Command) error {
			t.Errorf("%s: the run started", tc.name)
			return nil
		}
		if code := runCLI(c, tc.args...); code != exitFailed || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%s: code %d, stderr\n%s\nwant %q", tc.name, code, errb, tc.frag)
		}
	}
	// Epoch 2 exists: that resume starts.
	c, _, errb := realCLI()
	started := false
	c.runSpec = func(context.Context, *spec.Spec, runner.RunOptions, chan<- runner.Event, <-chan runner.Command) error {
		started = true
		return nil
	}
	if code := runCLI(c, "run", "--resume", "2", writeSpec(t, longer)); code != exitOK || !started {
		t.Errorf("resume from an existing epoch: code %d, stderr %s", code, errb)
	}
}

// Spec mistakes reach the user with file, line and key, exit code 1, and
// nothing starts.
func TestRunSpecMistakes(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ src, frag string }{
		{tinyRun(dir, "epoch = 3"), "exp.toml:11: key `epoch`: unknown key (did you mean `epochs`?)"},
		{tinyRun(dir, "lr = \"fast\""), "exp.toml:11: key `lr`: got the string \"fast\" (want a number"},
		{tinyRun(dir, "[grid]\nplugin = []"), "key `grid.plugin`: empty array"},
		{tinyRun(dir, "[grid]\nplugin = [\"gemini\"]\nprecision = [\"fp32\"]"),
			"skipping gemini x fp32 x 1: ColossalAI's Gemini trains in half precision"},
		{tinyRun(dir, "[grid]\nplugin = [\"gemini\"]\nprecision = [\"fp32\"]"), "no valid runs: all 1 cells of the grid were rejected"},
	}
	for _, tc := range cases {
		c, _, errb := realCLI()
		c.runSpec = func(context.Context, *spec.Spec, runner.RunOptions, chan<- runner.Event, <-chan runner.Command) error {
			t.Errorf("the run started")
			return nil
		}
		if code := runCLI(c, "run", "--headless", writeSpec(t, tc.src)); code != exitFailed || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("code %d, stderr\n%s\nwant %q", code, errb, tc.frag)
		}
	}
}

// cifarRecords is n CIFAR-10 records with the given labels cycling.
func cifarRecords(n int, labels ...byte) []byte {
	b := make([]byte, n*3073)
	for i := 0; i < n; i++ {
		b[i*3073] = labels[i%len(labels)]
	}
	return b
}

// idxFile is an idx file of unsigned bytes with the given dims.
func idxFile(dims []int, data []byte) []byte {
	b := []byte{0, 0, 8, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return append(b, data...)
}

// Broken data sets stop `resnetlab run` with the file's name and what was
// expected, exit code 1.
func TestRunDataErrorsNameTheFile(t *testing.T) {
	good := cifarRecords(2, 0, 9)
	cifar := func(t *testing.T, dir string, override map[string][]byte) {
		for _, n := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
			b, ok := override[n]
			if !ok {
				b = good
			}
			if b == nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	fmnist := func(t *testing.T, dir string, trainImages, trainLabels []byte) {
		files := map[string][]byte{
			"train-images-idx3-ubyte": trainImages, "train-labels-idx1-ubyte": trainLabels,
			"t10k-images-idx3-ubyte": idxFile([]int{1, 28, 28}, make([]byte, 784)),
			"t10k-labels-idx1-ubyte": idxFile([]int{1}, []byte{3}),
		}
		for n, b := range files {
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	images2 := idxFile([]int{2, 28, 28}, make([]byte, 2*784))
	cases := []struct {
		name, dataset string
		setup         func(t *testing.T, dir string)
		file, frag    string
	}{
		{"cifar missing", "cifar10", func(t *testing.T, d string) { cifar(t, d, map[string][]byte{"data_batch_4.bin": nil}) },
			"data_batch_4.bin", "missing (CIFAR-10 needs data_batch_1..5.bin and test_batch.bin in"},
		{"cifar short", "cifar10", func(t *testing.T, d string) { cifar(t, d, map[string][]byte{"data_batch_2.bin": good[:5000]}) },
			"data_batch_2.bin", "expected a multiple of 3073 bytes"},
		{"cifar one record fewer", "cifar10", func(t *testing.T, d string) {
			cifar(t, d, map[string][]byte{"data_batch_3.bin": good[:3073]})
		}, "data_batch_3.bin", "expected 2 records like"},
		{"cifar label", "cifar10", func(t *testing.T, d string) {
			cifar(t, d, map[string][]byte{"test_batch.bin": cifarRecords(2, 1, 10)})
		}, "test_batch.bin", "at byte 3073: expected a label in [0,10), found label 10 in record 1"},
		{"cifar empty", "cifar10", func(t *testing.T, d string) { cifar(t, d, map[string][]byte{"data_batch_1.bin": {}}) },
			"data_batch_1.bin", "found 0 bytes"},
		{"fmnist magic", "fashion-mnist", func(t *testing.T, d string) {
			fmnist(t, d, []byte("PK\x03\x04 not an idx file at all"), idxFile([]int{2}, []byte{1, 2}))
		}, "train-images-idx3-ubyte", "at byte 0"},
		{"fmnist dims", "fashion-mnist", func(t *testing.T, d string) {
			fmnist(t, d, idxFile([]int{2, 28, 27}, make([]byte, 2*28*27)), idxFile([]int{2}, []byte{1, 2}))
		}, "train-images-idx3-ubyte", "expected image dims [N 28 28]"},
		{"fmnist truncated", "fashion-mnist", func(t *testing.T, d string) {
			fmnist(t, d, images2[:len(images2)-100], idxFile([]int{2}, []byte{1, 2}))
		}, "train-images-idx3-ubyte", "(file truncated)"},
		{"fmnist label", "fashion-mnist", func(t *testing.T, d string) {
			fmnist(t, d, images2, idxFile([]int{2}, []byte{1, 12}))
		}, "train-labels-idx1-ubyte", "at byte 9: expected a label in [0,10)"},
		{"fmnist counts", "fashion-mnist", func(t *testing.T, d string) {
			fmnist(t, d, images2, idxFile([]int{3}, []byte{1, 2, 3}))
		}, "train-labels-idx1-ubyte", "has 3 labels but"},
	}
	for _, tc := range cases {
		dataDir := t.TempDir()
		tc.setup(t, dataDir)
		src := strings.Replace(tinyRun(t.TempDir(), fmt.Sprintf("data_dir = %q", dataDir)),
			`dataset = "synthetic"`, fmt.Sprintf("dataset = %q", tc.dataset), 1)
		c, _, errb := realCLI()
		code := runCLI(c, "run", "--headless", writeSpec(t, src))
		want := filepath.Join(dataDir, tc.file)
		if code != exitFailed || !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%s: code %d, stderr\n%s\nwant %q and %q", tc.name, code, errb, want, tc.frag)
		}
	}
}

func TestClipLines(t *testing.T) {
	long := strings.TrimSuffix(strings.Repeat("line\n", 25), "\n")
	got := clipLines(long, 10)
	want := strings.TrimSuffix(strings.Repeat("line\n", 10), "\n") +
		"\n... and 15 more lines (the whole error is in the run's result file)"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if s := strings.Repeat("x\n", 9) + "x"; clipLines(s, 10) != s {
		t.Fatal("10 lines were clipped")
	}
}

// TestHelperMain is the real program in a child process: its arguments
// come from $RNL_HELPER_MAIN, separated by newlines.
func TestHelperMain(t *testing.T) {
	args := os.Getenv("RNL_HELPER_MAIN")
	if args == "" {
		t.Skip("the helper process of TestInterruptCheckpointsAndExits130")
	}
	os.Args = append([]string{"resnetlab"}, strings.Split(args, "\n")...)
	main()
}

// Ctrl-C (SIGINT) during a headless run saves a checkpoint of the
// position reached and exits 130; the checkpoint loads.
func TestInterruptCheckpointsAndExits130(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	// Many epochs, checkpoints only at the end: the one checkpoint found
	// is the interrupt's.
	src := strings.Replace(tinyRun(dir, ""), "epochs = 2", "epochs = 1000", 1)
	src = strings.Replace(src, "interval = 1", "interval = 1000", 1)
	specPath := writeSpec(t, src)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMain$", "-test.count=1")
	cmd.Env = append(os.Environ(), "RNL_HELPER_MAIN=run\n--headless\n"+specPath)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	var out []string
	for lines.Scan() { // wait until two epochs are done, then press Ctrl-C
		out = append(out, lines.Text())
		if strings.Contains(lines.Text(), "epoch 2/1000: loss") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		out = append(out, lines.Text())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not stop within 60 s of SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit code %d, want %d; stdout:\n%s\nstderr:\n%s", code, exitInterrupted, strings.Join(out, "\n"), &stderr)
	}
	if !strings.Contains(stderr.String(), "resnetlab run: interrupted") {
		t.Fatalf("stderr %q", &stderr)
	}
	ck := filepath.Join(dir, "ck")
	have, err := ckpt.ListRefs(ck)
	if err != nil || len(have) != 1 || have[0].Epoch < 2 || have[0].Step == 0 {
		t.Fatalf("checkpoints %v (%v), want one mid-epoch save of the epoch in progress (>= 2)", have, err)
	}
	saved := fmt.Sprintf("checkpoint of %s saved in %s (3 files; --resume %s continues from it)", have[0].Describe(), ck, have[0])
	all := strings.Join(out, "\n")
	if !strings.Contains(all, saved) || !strings.Contains(all, "[torch_ddp-fp32-1] interrupted: ") ||
		strings.Contains(all, "FAILED") {
		t.Fatalf("stdout lacks %q or the interrupt line, or says FAILED:\n%s", saved, all)
	}
	// The end says which checkpoint the run has and the command that goes
	// on from it, as the spec was given (the spec's one run: no --run).
	goOn := fmt.Sprintf("torch_ddp-fp32-1 was interrupted; its last checkpoint, of %s, is in %s. To continue it:\n"+
		"    resnetlab run --headless --resume %s %s\nresnetlab run: interrupted\n", have[0].Describe(), ck, have[0], specPath)
	if !strings.HasSuffix(all+"\n"+stderr.String(), goOn) {
		t.Fatalf("the output does not end with\n%s\nstdout:\n%s\nstderr:\n%s", goOn, all, &stderr)
	}
	m, o, s := have[0].Paths(ck)
	for _, p := range []string{m, o, s} {
		meta, _, err := ckpt.ReadFile(p, "")
		if err != nil {
			t.Fatal(err)
		}
		e, err := ckpt.MetaInt(meta, "epoch")
		st, serr := ckpt.MetaInt(meta, "step")
		if err != nil || serr != nil || e != have[0].Epoch || st != have[0].Step {
			t.Fatalf("%s: epoch %d step %d (%v, %v), want %s", p, e, st, err, serr, have[0])
		}
	}
	temps, _ := filepath.Glob(filepath.Join(ck, "*.tmp-*"))
	if entries, _ := os.ReadDir(ck); len(entries) != 3 || len(temps) != 0 {
		t.Fatalf("checkpoint directory holds %d entries (temporary: %v), want the 3 files", len(entries), temps)
	}
}

// eval of an epoch that is not there lists the checkpoints that are.
func TestEvalAbsentEpoch(t *testing.T) {
	dir := t.TempDir()
	saveCheckpoint(t, dir, 5, nil)
	saveCheckpoint(t, dir, 10, nil)
	missing := t.TempDir() + "/none"
	cases := []struct {
		args []string
		frag string
	}{
		{[]string{"eval", "-c", dir, "-e", "7"},
			fmt.Sprintf("resnetlab eval: -e 7: no %s (checkpoints saved in %s: 5, 10)", filepath.Join(dir, "model_7.pth"), dir)},
		{[]string{"eval", "-c", missing, "-e", "7"}, "resnetlab eval: -e 7: checkpoint directory " + missing + ": open " + missing + ": no such file"},
	}
	for _, tc := range cases {
		c, _, errb := testCLI()
		c.eval = func(context.Context, runner.EvalOptions) (float64, []float64, error) {
			t.Errorf("%v: eval ran", tc.args)
			return 0, nil, nil
		}
		if code := runCLI(c, tc.args...); code != exitFailed || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%v: code %d, stderr %q, want %q", tc.args, code, errb, tc.frag)
		}
	}
}
