package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"resnetlab/ckpt"
)

// diskState lists every path under root with its kind, size and mode, and
// with mtimes the modification time too (of directories as well: a file
// created and removed again changes its directory's).
func diskState(t *testing.T, root string, mtimes bool) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(&b, "%s %v %d", rel, st.Mode(), st.Size())
		if mtimes {
			fmt.Fprintf(&b, " %d", st.ModTime().UnixNano())
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A run that fails before it trains leaves the disk as it was: no
// checkpoint or results directory made by the path checks (a --resume of
// a checkpoint that is not there used to create the directory it named),
// by a data set that does not load, or by a run that fails at its first
// step (a too-small Gemini budget): nothing created, nothing touched.
func TestFailedRunLeavesTheDiskAsItWas(t *testing.T) {
	root := t.TempDir()
	held := filepath.Join(root, "held") // a checkpoint directory with epochs 1 and 2
	for _, e := range []int{1, 2} {
		m, o, s := ckpt.Paths(held, e)
		for _, p := range []string{m, o, s} {
			if err := ckpt.WriteFile(p, "model", nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyData := filepath.Join(root, "nodata")
	if err := os.Mkdir(emptyData, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each case's spec checkpoints into and records under a directory
	// root/caseN that is not there (the spec itself lives in its own
	// temporary directory).
	spec := func(nd, extra string) string { return writeSpec(t, tinyRun(nd, extra)) }
	heldSpec := func(nd, extra string) string {
		src := replaceDir(tinyRun(nd, extra), filepath.Join(nd, "ck"), held)
		return writeSpec(t, strings.Replace(src, "epochs = 2", "epochs = 4", 1))
	}
	cases := []struct {
		name   string
		args   func(nd string) []string
		frag   string
		mtimes bool // nothing at all may change (false: no path may appear or go)
	}{
		{"resume flag, no checkpoint directory", func(nd string) []string {
			return []string{"run", "--headless", "--resume", "1", spec(nd, "")}
		}, "has no checkpoint directory", true},
		{"resume flag, no such checkpoint", func(nd string) []string {
			return []string{"run", "--headless", "--resume", "3", heldSpec(nd, "")}
		}, "no checkpoint of epoch 3", true},
		{"resume key", func(nd string) []string {
			return []string{"run", "--headless", heldSpec(nd, "resume = 3")}
		}, "no checkpoint of epoch 3", true},
		{"results through a file", func(nd string) []string {
			return []string{"run", "--headless", "--results", filepath.Join(file, "res"), spec(nd, "")}
		}, "--results: cannot write results in", true},
		{"grid, resume of a checkpoint not there", func(nd string) []string {
			src := replaceDir(tinyRun(nd, "[grid]\nplugin = [\"torch_ddp\", \"gemini\"]"),
				filepath.Join(nd, "ck"), filepath.Join(nd, "ck", "{plugin}"))
			return []string{"run", "--headless", "--resume", "1", writeSpec(t, src)}
		}, "run gemini-fp16-1 has no checkpoint directory", true},
		{"data set that does not load", func(nd string) []string {
			src := strings.Replace(tinyRun(nd, fmt.Sprintf("data_dir = %q", emptyData)),
				`dataset = "synthetic"`, `dataset = "cifar10"`, 1)
			return []string{"run", "--headless", writeSpec(t, src)}
		}, emptyData, true},
		{"gemini budget too small", func(nd string) []string {
			return []string{"run", "--headless", spec(nd, "[grid]\nplugin = [\"gemini\"]\n[gemini]\ndevice_budget = \"1KiB\"")}
		}, "is too small", false},
	}
	for i, tc := range cases {
		args := tc.args(filepath.Join(root, fmt.Sprintf("case%d", i)))
		before := diskState(t, root, tc.mtimes)
		c, out, errb := realCLI()
		code := runCLI(c, args...)
		if code != exitFailed || !strings.Contains(errb.String()+out.String(), tc.frag) {
			t.Errorf("%s: exit %d, stdout\n%s\nstderr\n%s\nwant exit 1 and %q", tc.name, code, out, errb, tc.frag)
		}
		if after := diskState(t, root, tc.mtimes); after != before {
			t.Errorf("%s: the failed run changed the disk:\nbefore\n%s\nafter\n%s", tc.name, before, after)
		}
	}
}
