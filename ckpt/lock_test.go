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
