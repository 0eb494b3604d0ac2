package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"resnetlab/runner"
	"resnetlab/spec"
)

// testCLI returns a CLI writing into buffers, with no TUI and no terminal.
func testCLI() (*cli, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	c := newCLI(&out, &errb)
	c.tui = nil
	c.isTTY = func() bool { return false }
	c.now = func() time.Time { return time.Unix(0, 0) }
	c.runSpec = func(context.Context, *spec.Spec, runner.RunOptions, chan<- runner.Event, <-chan runner.Command) error {
		return errors.New("runSpec not faked")
	}
	c.eval = func(context.Context, runner.EvalOptions) (float64, []float64, error) {
		return 0, nil, errors.New("eval not faked")
	}
	c.fetch = func(context.Context, string, string, bool, func(string, ...any)) error {
		return errors.New("fetch not faked")
	}
	// The specs of these tests use relative directories and fake runs: no
	// directory is created (robust_test.go checks the real checkPaths).
	c.checkPaths = func(*spec.Spec, []spec.Cell, runner.RunOptions) error { return nil }
	return c, &out, &errb
}

func runCLI(c *cli, args ...string) int { return c.main(context.Background(), args) }

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		c, out, _ := testCLI()
		if code := runCLI(c, args...); code != exitOK || out.String() != mainUsage {
			t.Errorf("%v: code %d, output %q", args, code, out.String())
		}
	}
	for name, cmd := range commands {
		for _, args := range [][]string{{"help", name}, {name, "--help"}, {name, "-h"}} {
			c, out, _ := testCLI()
			if code := runCLI(c, args...); code != exitOK || out.String() != cmd.usage {
				t.Errorf("%v: code %d, output %q", args, code, out.String())
			}
		}
		if !strings.Contains(cmd.usage, "Examples:\n  resnetlab "+name) {
			t.Errorf("%s usage has no examples", name)
		}
		if !strings.Contains(mainUsage, "\n  "+name+" ") {
			t.Errorf("main usage does not list %s", name)
		}
	}
	c, _, errb := testCLI()
	if code := runCLI(c); code != exitUsage || errb.String() != mainUsage {
		t.Errorf("no arguments: code %d, stderr %q", code, errb.String())
	}
	c, _, errb = testCLI()
	if code := runCLI(c, "train"); code != exitUsage || !strings.Contains(errb.String(), `unknown command "train"`) {
		t.Errorf("unknown command: %d %q", code, errb.String())
	}
	c, _, errb = testCLI()
	if code := runCLI(c, "help", "train"); code != exitUsage || !strings.Contains(errb.String(), `unknown command "train"`) {
		t.Errorf("help of unknown command: %d %q", code, errb.String())
	}
}

func writeSpec(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "exp.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const smallSpec = "dataset = \"synthetic\"\nepochs = 4\ncheckpoint = \"c/{plugin}-{precision}\"\n[grid]\nplugin = [\"torch_ddp\", \"gemini\"]\nprecision = [\"fp32\", \"fp16\"]\n"

func TestRunArgErrors(t *testing.T) {
	sp := writeSpec(t, smallSpec)
	cases := []struct {
		args []string
		code int
		frag string
	}{
		{[]string{"run"}, exitUsage, "want one spec file, got 0 arguments"},
		{[]string{"run", sp, sp}, exitUsage, "got 2 arguments"},
		{[]string{"run", "--fast", sp}, exitUsage, "resnetlab run: unknown flag --fast\n"},
		{[]string{"run", "--resume", "x", sp}, exitUsage, "resnetlab run: --resume \"x\": want an epoch"},
		{[]string{"run", "nope.toml"}, exitFailed, "spec nope.toml: file not found"},
		{[]string{"run", writeSpec(t, "epochs = 0\n")}, exitFailed, "exp.toml:1: key `epochs`: 0 is out of range"},
		{[]string{"run", sp, "--resume", "5"}, exitUsage, "--resume 5: " + sp + " trains 4 epochs"},
		{[]string{"run", "--resume", "2@0", sp}, exitUsage, "the step after @ must be a number >= 1"},
		{[]string{"run", sp, "--resume", "5@3"}, exitUsage, "--resume 5@3: " + sp + " trains 4 epochs"},
		{[]string{"run", "--device", "tpu", sp}, exitUsage, `--device "tpu": want "auto", "cpu" or "cuda"`},
		{[]string{"run", "--run", "nosuch", sp}, exitUsage, `--run "nosuch": ` + sp + ` has no run "nosuch" (its runs: `},
	}
	for _, tc := range cases {
		c, _, errb := testCLI()
		if code := runCLI(c, tc.args...); code != tc.code || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%v: code %d (want %d), stderr %q (want %q)", tc.args, code, tc.code, errb.String(), tc.frag)
		}
	}
}

func TestRunHeadless(t *testing.T) {
	sp := writeSpec(t, smallSpec)
	c, out, errb := testCLI()
	var gotSpec *spec.Spec
	var gotOpts runner.RunOptions
	c.runSpec = func(ctx context.Context, s *spec.Spec, o runner.RunOptions, ev chan<- runner.Event, _ <-chan runner.Command) error {
		gotSpec, gotOpts = s, o
		ev <- runner.RunQueued{Info: runner.RunInfo{ID: "torch_ddp-fp32-1", Plugin: "torch_ddp", Precision: "fp32",
			WorldSize: 1, Dataset: "synthetic", Epochs: 4, Backend: "cpu", Devices: []string{"cpu"}, StepsPerEpoch: 100}}
		ev <- runner.EpochDone{Run: "torch_ddp-fp32-1", Epoch: 1, Loss: 1.5, TestAcc: 0.5, Seconds: 2, LR: 0.003}
		ev <- runner.RunFinished{Run: "torch_ddp-fp32-1", Err: errors.New("final test accuracy 0.5000 is below target_acc 0.6")}
		return nil
	}
	// Flags after the spec work too.
	code := runCLI(c, "run", sp, "--resume", "3", "--device", "cpu", "--results", "/tmp/r")
	if code != exitFailed || gotSpec == nil {
		t.Fatalf("a failed run must exit 1, got %d; stderr %s", code, errb)
	}
	if gotSpec.Resume != 3 || gotSpec.Device != "cpu" || gotSpec.ResultsDir != "/tmp/r" || !gotOpts.Headless {
		t.Fatalf("overrides not applied: spec %+v opts %+v", gotSpec, gotOpts)
	}
	wantOut := "[torch_ddp-fp32-1] queued: torch_ddp fp32, 1 rank on cpu (cpu), synthetic, 4 epochs x 100 steps\n" +
		"[torch_ddp-fp32-1] epoch 1/4: loss 1.5000, test acc 50.00%, lr 0.003, 2.0 s, ETA 6s\n" +
		"[torch_ddp-fp32-1] FAILED: final test accuracy 0.5000 is below target_acc 0.6\n"
	if out.String() != wantOut {
		t.Fatalf("stdout\n%s\nwant\n%s", out, wantOut)
	}
	// The fp32 gemini cell is reported; there is no UI in this build.
	for _, frag := range []string{"exp.toml:4: skipping gemini x fp32 x 1: ColossalAI's Gemini trains in half precision",
		"this build has no terminal UI; running headless"} {
		if !strings.Contains(errb.String(), frag) {
			t.Errorf("stderr %q lacks %q", errb.String(), frag)
		}
	}
}

func TestRunOutcomes(t *testing.T) {
	sp := writeSpec(t, smallSpec)
	c, _, errb := testCLI()
	c.runSpec = func(context.Context, *spec.Spec, runner.RunOptions, chan<- runner.Event, <-chan runner.Command) error {
		return errors.New("no CUDA device")
	}
	if code := runCLI(c, "run", "--headless", sp); code != exitFailed || !strings.Contains(errb.String(), "resnetlab run: no CUDA device") {
		t.Fatalf("runSpec error: %d %q", code, errb.String())
	}
	c, _, _ = testCLI()
	c.runSpec = func(context.Context, *spec.Spec, runner.RunOptions, chan<- runner.Event, <-chan runner.Command) error {
		return nil
	}
	if code := runCLI(c, "run", "--headless", sp); code != exitOK {
		t.Fatalf("success: %d", code)
	}
	c, _, errb = testCLI()
	ctx, cancel := context.WithCancel(context.Background())
	c.runSpec = func(ctx context.Context, _ *spec.Spec, _ runner.RunOptions, _ chan<- runner.Event, _ <-chan runner.Command) error {
		cancel() // as Ctrl-C does
		<-ctx.Done()
		return ctx.Err()
	}
	if code := c.main(ctx, []string{"run", "--headless", sp}); code != exitInterrupted || !strings.Contains(errb.String(), "interrupted") {
		t.Fatalf("interrupt: %d %q", code, errb.String())
	}
}

func TestRunUsesTUIOnATerminal(t *testing.T) {
	sp := writeSpec(t, smallSpec)
	c, out, errb := testCLI()
	c.isTTY = func() bool { return true }
	var uiCells []spec.Cell
	var uiSawEvent, uiSentStop bool
	c.tui = func(ctx context.Context, s *spec.Spec, cells []spec.Cell, ev <-chan runner.Event, cmds chan<- runner.Command) error {
		uiCells = cells
		_, uiSawEvent = <-ev
		cmds <- runner.Stop{Checkpoint: true}
		uiSentStop = true
		for range ev {
		}
		return nil
	}
	c.runSpec = func(ctx context.Context, _ *spec.Spec, o runner.RunOptions, ev chan<- runner.Event, cmds <-chan runner.Command) error {
		if o.Headless {
			return errors.New("headless with a UI")
		}
		if !o.StayOpen { // r must be able to re-open a finished run while the UI is up
			return errors.New("RunSpec not kept open for the UI")
		}
		ev <- runner.Log{Run: "x", Text: "hello"}
		if _, ok := (<-cmds).(runner.Stop); !ok {
			return errors.New("no stop command")
		}
		return nil
	}
	if code := runCLI(c, "run", sp); code != exitOK {
		t.Fatalf("code %d, stderr %s", code, errb)
	}
	if len(uiCells) != 3 || !uiSawEvent || !uiSentStop || out.Len() != 0 {
		t.Fatalf("UI got %d cells, event %v, stop %v; stdout %q", len(uiCells), uiSawEvent, uiSentStop, out)
	}
	c, _, errb = testCLI()
	c.tui = func(context.Context, *spec.Spec, []spec.Cell, <-chan runner.Event, chan<- runner.Command) error {
		t.Fatal("UI started without a terminal")
		return nil
	}
	c.runSpec = func(context.Context, *spec.Spec, runner.RunOptions, chan<- runner.Event, <-chan runner.Command) error {
		return nil
	}
	if code := runCLI(c, "run", sp); code != exitOK || !strings.Contains(errb.String(), "not a terminal; running headless") {
		t.Fatalf("no TTY: %d %q", code, errb.String())
	}
}
