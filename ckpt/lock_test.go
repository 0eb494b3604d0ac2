package runner

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
	first, err := lockCheckpointDir(dir, "torch_ddp-fp32-1")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	_, err = lockCheckpointDir(dir, "gemini-fp16-1")
	want := fmt.Sprintf("checkpoint directory %s is in use by another run (pid %d host %s run torch_ddp-fp32-1)", dir, os.Getpid(), host)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("second lock: got %v\nwant %s...", err, want)
	}
	first.release()
	if _, err := os.Stat(filepath.Join(dir, checkpointLockName)); !os.IsNotExist(err) {
		t.Fatalf("lock file after release: %v", err)
	}
	again, err := lockCheckpointDir(dir, "gemini-fp16-1")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.release()
}

// A run whose checkpoint directory another run holds fails before it
// trains or writes a checkpoint.
func TestRunRefusesLockedCheckpointDir(t *testing.T) {
	s := tinySpec(t, "")
	s.Epochs = 1
	dir := strings.ReplaceAll(s.Checkpoint, "{plugin}-{precision}-{gpus}", "torch_ddp-fp32-1")
	held, err := lockCheckpointDir(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer held.release()
	_, err = collect(t, s, RunOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "checkpoint directory "+dir+" is in use by another run (pid ") {
		t.Fatalf("got %v", err)
	}
	if have, _ := ListCheckpoints(dir); len(have) != 0 {
		t.Fatalf("checkpoints %v written into a locked directory", have)
	}
}
