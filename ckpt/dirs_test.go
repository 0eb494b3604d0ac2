package ckpt

import (
	"os"
	"path/filepath"
	"testing"
)

// FreshDir moves a fresh run past every directory holding a checkpoint
// file (even a lone one), numbering after the highest; ResumeDir reads the
// newest directory holding the save asked for.
func TestFreshAndResumeDirs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ck")
	touch := func(d string, names ...string) {
		t.Helper()
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(d, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %s, want %s", what, got, want)
		}
	}
	check("missing dir", FreshDir(dir), dir)
	touch(dir, "notes.txt", "model_05.pth")
	if err := os.Mkdir(filepath.Join(dir, "model_3.pth"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("no checkpoint file (a directory of that name is none)", FreshDir(dir), dir)
	touch(dir, "model_2.pth") // a lone file of another run is still its file
	check("a lone model file", FreshDir(dir), dir+"-run2")
	touch(dir + "-run2")
	check("an empty numbered dir is reused", FreshDir(dir), dir+"-run2")
	touch(dir+"-run2", "optimizer_1-step4.pth")
	touch(dir+"-run07", "model_1.pth") // not a number as FreshDir writes it
	touch(dir+"-runx", "model_1.pth")
	check("after run 2", FreshDir(dir), dir+"-run3")
	touch(dir+"-run5", "lr_scheduler_1.pth")
	check("after the highest, not the first gap", FreshDir(dir), dir+"-run6")

	full := func(d string, e string) { touch(d, "model_"+e+".pth", "optimizer_"+e+".pth", "lr_scheduler_"+e+".pth") }
	full(dir, "1")
	full(dir+"-run2", "1")
	full(dir+"-run2", "2")
	check("resume 1: the newest holding it", ResumeDir(dir, Ref{Epoch: 1}), dir+"-run2")
	check("resume 2", ResumeDir(dir, Ref{Epoch: 2}), dir+"-run2")
	check("resume 9: none holds it, the newest with files", ResumeDir(dir, Ref{Epoch: 9}), dir+"-run5")
	other := filepath.Join(root, "other")
	check("resume without any", ResumeDir(other, Ref{Epoch: 1}), other)
}
