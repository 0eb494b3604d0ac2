package ckpt

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A fresh run never touches the checkpoint files of another run. When the
// spec's checkpoint directory DIR already holds some, the run writes to
// the numbered sibling DIR-runN instead (N one more than the highest one
// holding any; DIR itself counts as 1), the way Lightning starts a new
// version_N: running the same spec twice keeps working and loses nothing.
// A resume reads the newest of them that holds the checkpoint asked for.

// runSuffix separates a checkpoint directory from its number.
const runSuffix = "-run"

// fileRE matches every file name a save may write, complete save or not
// (a lone model_E.pth is still another run's file); "model_05.pth" is
// none: no save writes that name.
var fileRE = regexp.MustCompile(`^(model|optimizer|lr_scheduler)_[1-9][0-9]*(-step[1-9][0-9]*)?\.pth$`)

// HoldsFiles reports whether dir holds any regular file by those names (a
// missing or unreadable dir holds none).
func HoldsFiles(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		return e.Type().IsRegular() && fileRE.MatchString(e.Name())
	})
}

// runDir is one of dir's numbered directories: dir itself is number 1.
type runDir struct {
	path string
	n    int
}

// runDirs lists dir and its numbered siblings that exist, lowest number
// first; dir is always listed.
func runDirs(dir string) []runDir {
	dir = filepath.Clean(dir)
	out := []runDir{{dir, 1}}
	parent, base := filepath.Split(dir)
	entries, err := os.ReadDir(filepath.Clean(parent + "."))
	if err != nil {
		return out
	}
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), base+runSuffix)
		n, err := strconv.Atoi(num)
		if ok && err == nil && n >= 2 && strconv.Itoa(n) == num && e.IsDir() {
			out = append(out, runDir{filepath.Join(parent, e.Name()), n})
		}
	}
	slices.SortFunc(out, func(a, b runDir) int { return a.n - b.n })
	return out
}

// FreshDir is where a fresh run keeps its checkpoints: dir when none of
// dir and its numbered siblings holds a checkpoint file, else dir-runN
// with N one more than the highest that does. It creates nothing.
func FreshDir(dir string) string {
	last := 0
	for _, d := range runDirs(dir) {
		if HoldsFiles(d.path) {
			last = d.n
		}
	}
	if last == 0 {
		return dir
	}
	return filepath.Clean(dir) + runSuffix + strconv.Itoa(last+1)
}

// ResumeDir is where a run resuming from ref reads: the newest of dir and
// its numbered siblings that holds ref's complete save; else the newest
// that holds any checkpoint file (so that the error lists what is there);
// else dir.
func ResumeDir(dir string, ref Ref) string {
	ds := runDirs(dir)
	ds[0].path = dir // as the spec spells it, for the messages
	slices.Reverse(ds)
	for _, d := range ds {
		if have, err := ListRefs(d.path); err == nil && slices.Contains(have, ref) {
			return d.path
		}
	}
	for _, d := range ds {
		if HoldsFiles(d.path) {
			return d.path
		}
	}
	return dir
}
