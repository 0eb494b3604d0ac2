package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/runner"
	"resnetlab/spec"
)

// A tiny real grid of two runs, for the quit rule.
func quitSpec(t *testing.T) (sp, dir string) {
	dir = t.TempDir()
	src := "name = \"q\"\ndataset = \"synthetic\"\nwidth = 4\nepochs = 2\nbatch_size = 20\ndevice = \"cpu\"\n" +
		"checkpoint = \"" + filepath.Join(dir, "ck", "{plugin}") + "\"\nresults_dir = \"" + filepath.Join(dir, "results") + "\"\n" +
		"[synthetic]\ntrain = 120\ntest = 40\n[grid]\nplugin = [\"torch_ddp\", \"gemini\"]\n"
	return writeSpec(t, src), dir
}

// One rule for every way out of a training grid in the UI: q then y, q
// then n and Ctrl-C all end the training run interrupted, start no other
// run and exit 130; y and Ctrl-C checkpoint first, n does not. The UI
// quitting prints the same summary table as headless.
func TestUIQuitRule(t *testing.T) {
	for _, c := range []struct {
		name       string
		send       runner.Command // nil: Ctrl-C (the UI just returns)
		checkpoint bool
	}{
		{"q y", runner.Quit{Checkpoint: true}, true},
		{"q n", runner.Quit{}, false},
		{"ctrl+c", nil, true},
	} {
		sp, dir := quitSpec(t)
		cl, out, errb := testCLI()
		cl.isTTY = func() bool { return true }
		cl.runSpec = runner.RunSpec
		cl.tui = func(ctx context.Context, s *spec.Spec, cells []spec.Cell, ev <-chan runner.Event, cmds chan<- runner.Command) error {
			for e := range ev {
				if sd, ok := e.(runner.StepDone); ok && sd.Step == 2 {
					break
				}
			}
			if c.send == nil {
				return nil
			}
			cmds <- c.send
			for e := range ev {
				if _, ok := e.(runner.RunFinished); ok {
					return nil
				}
			}
			return nil
		}
		code := runCLI(cl, "run", sp)
		if code != exitInterrupted {
			t.Errorf("%s: exit %d, want %d; stderr %s", c.name, code, exitInterrupted, errb)
		}
		saved, _ := filepath.Glob(filepath.Join(dir, "ck", "torch_ddp", "model_*.pth"))
		if c.checkpoint != (len(saved) == 1) {
			t.Errorf("%s: checkpoints %v", c.name, saved)
		}
		if _, err := os.Stat(filepath.Join(dir, "ck", "gemini")); err == nil {
			if g, _ := filepath.Glob(filepath.Join(dir, "ck", "gemini", "*.pth")); len(g) > 0 {
				t.Errorf("%s: the second run wrote %v", c.name, g)
			}
		}
		if g, _ := filepath.Glob(filepath.Join(dir, "results", "*gemini*")); len(g) > 0 {
			t.Errorf("%s: the second run left a result %v", c.name, g)
		}
		if !strings.Contains(out.String(), "interrupted") || !strings.Contains(out.String(), "torch_ddp") {
			t.Errorf("%s: no summary table after the UI quit: %q", c.name, out)
		}
		if c.send == nil && !strings.Contains(out.String(), "torch_ddp-fp32-1: interrupted: ctrl+c in the terminal UI") {
			t.Errorf("%s: the summary should say why the run stopped: %q", c.name, out)
		}
		// Then it says how to go on, and the commands it gives do.
		cmds := continueCommands(t, out.String())
		want := []string{"resnetlab run " + sp} // nothing saved: both train from the start, every run of the spec
		if refs, _ := ckpt.ListRefs(filepath.Join(dir, "ck", "torch_ddp")); c.checkpoint && len(refs) == 1 {
			want = []string{"resnetlab run --resume " + refs[0].String() + " --run torch_ddp-fp32-1 " + sp,
				"resnetlab run --run gemini-fp16-1 " + sp}
		}
		if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: commands to go on\n%s\nwant\n%s\nstdout\n%s", c.name, strings.Join(cmds, "\n"), strings.Join(want, "\n"), out)
			continue
		}
		if c.name == "ctrl+c" { // the commands train the rest of the grid (once is enough)
			for _, line := range cmds {
				cl, cout, cerr := realCLI()
				if code := runCLI(cl, strings.Fields(line)[1:]...); code != exitOK {
					t.Errorf("%s: exit %d\nstdout\n%s\nstderr\n%s", line, code, cout, cerr)
				}
			}
			if !hasDoneResults(t, filepath.Join(dir, "results"), "torch_ddp-fp32-1", "gemini-fp16-1") {
				t.Errorf("%s: the commands given did not finish the grid", c.name)
			}
		}
	}
}

// continueCommands are the indented command lines run prints after an
// interrupt.
func continueCommands(t *testing.T, out string) []string {
	t.Helper()
	var cmds []string
	for _, l := range strings.Split(out, "\n") {
		if cmd, ok := strings.CutPrefix(l, "    resnetlab run "); ok {
			cmds = append(cmds, "resnetlab run "+cmd)
		}
	}
	return cmds
}

// hasDoneResults reports whether dir holds a result of status done for
// every run named.
func hasDoneResults(t *testing.T, dir string, runs ...string) bool {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	rs, err := report.ReadResults(paths)
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]bool{}
	for _, r := range rs {
		done[r.Run] = r.Status == report.StatusDone
	}
	for _, r := range runs {
		if !done[r] {
			return false
		}
	}
	return true
}
