package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"resnetlab/runner"
	"resnetlab/spec"
)

// procDir is a directory that access(2) calls writable for root but that
// cannot hold a file; the test skips where there is none (not root, no /proc).
func procDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("access(2) refuses /proc to a user other than root already")
	}
	for _, d := range []string{"/proc", "/proc/self", "/sys"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() && syscall.Access(d, accessWrite|accessSearch) == nil {
			return d
		}
	}
	t.Skip("no /proc or /sys directory that access(2) calls writable")
	return ""
}

// Root passes access(2) on /proc: the preflight tries to create a file there
// and refuses a checkpoint or results directory under it before the run
// starts, in one line each naming the key or flag and the path.
func TestRunRefusesProcAsRoot(t *testing.T) {
	proc := procDir(t)
	if err := checkWritable(proc); err == nil {
		t.Fatalf("checkWritable(%s) = nil, want an error", proc)
	}
	ck := filepath.Join(proc, "resnetlab-ck")
	dir := t.TempDir()
	src := replaceDir(tinyRun(dir, ""), filepath.Join(dir, "ck"), ck+"/{plugin}")
	c, _, errb := realCLI()
	c.runSpec = func(context.Context, *spec.Spec, runner.RunOptions, chan<- runner.Event, <-chan runner.Command) error {
		t.Error("the run started")
		return nil
	}
	if code := runCLI(c, "run", "--headless", "--results", proc, writeSpec(t, src)); code != exitFailed {
		t.Fatalf("exit %d, want 1; stderr\n%s", code, errb)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if strings.Contains(l, proc) {
			lines = append(lines, l)
		}
	}
	want := []string{
		fmt.Sprintf("exp.toml:8: key `checkpoint`: run torch_ddp-fp32-1 cannot write checkpoints in %q: %s: cannot create a file there: ",
			ck+"/torch_ddp", proc),
		fmt.Sprintf("--results: cannot write results in %q: %s: cannot create a file there: ", proc, proc),
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr\n%s\nwant one line each for checkpoint and --results", errb)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %q\nwant it to contain %q", lines[i], w)
		}
	}
}

// The probe leaves the disk as it was: a writable directory passes without
// a file appearing in it or its modification time changing, and a missing
// one is not created.
func TestCheckWritableChangesNothing(t *testing.T) {
	dir := t.TempDir()
	before := diskState(t, dir, true)
	for _, d := range []string{dir, filepath.Join(dir, "a", "b")} {
		if err := checkWritable(d); err != nil {
			t.Fatalf("checkWritable(%s): %v", d, err)
		}
	}
	if after := diskState(t, dir, true); after != before {
		t.Fatalf("checkWritable changed the disk:\nbefore\n%s\nafter\n%s", before, after)
	}
	if err := probeNamed(dir); err != nil {
		t.Fatalf("probeNamed(%s): %v", dir, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("probeNamed left %v", entries)
	}
}
