package ckpt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A second holder of a checkpoint directory is refused with an error that
// names the first (flock on two descriptors conflicts within one process
// too); after a release the directory can be locked again.
func TestCheckpointDirLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	first, err := LockDir(dir, "torch_ddp-fp32-1")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	_, err = LockDir(dir, "gemini-fp16-1")
	want := fmt.Sprintf("checkpoint directory %s is in use by another run (pid %d host %s run torch_ddp-fp32-1)", dir, os.Getpid(), host)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("second lock: got %v\nwant %s...", err, want)
	}
	first.Release()
	if _, err := os.Stat(filepath.Join(dir, LockName)); !os.IsNotExist(err) {
		t.Fatalf("lock file after release: %v", err)
	}
	again, err := LockDir(dir, "gemini-fp16-1")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
}

// The directories LockDir creates go again on Release while they are
// empty (a run that saved nothing leaves no trace); a directory holding a
// file stays, and so does every directory that was there before.
func TestLockDirRemovesWhatItCreated(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ck", "smoke", "gemini-fp16-1")
	l, err := LockDir(dir, "gemini-fp16-1")
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
		t.Fatalf("after a run that saved nothing, %s holds %v (%v), want nothing", root, entries, err)
	}

	l, err = LockDir(dir, "gemini-fp16-1")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, "ck", "smoke", "torch_ddp-fp32-1")
	if err := os.Mkdir(other, 0o755); err != nil { // another run's directory, made meanwhile
		t.Fatal(err)
	}
	l.Release()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want it removed", dir, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another run's directory went: %v", err)
	}

	l, err = LockDir(dir, "gemini-fp16-1")
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "model_1.pth")
	if err := os.WriteFile(kept, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("a saved file went with the lock: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, LockName)); !os.IsNotExist(err) {
		t.Errorf("lock file after release: %v", err)
	}
}
