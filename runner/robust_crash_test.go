package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"resnetlab/ckpt"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The helper process of TestKillDuringCheckpointWrite: it overwrites
// $RNL_HELPER_WRITER (a model file) with a large checkpoint, again and
// again, until it is killed.
func TestHelperWriter(t *testing.T) {
	path := os.Getenv("RNL_HELPER_WRITER")
	if path == "" {
		t.Skip("the helper process of TestKillDuringCheckpointWrite")
	}
	ts := crashTensors("child", 8<<20) // 32 MiB: the kill lands mid-write
	for i := 0; ; i++ {
		if err := ckpt.WriteFile(path, "model", map[string]any{"writer": "child", "n": i}, ts); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
}

// crashTensors is a checkpoint's tensors, different for each writer.
func crashTensors(writer string, n int) []ckpt.Tensor {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(i%977) * float32(len(writer))
	}
	return []ckpt.Tensor{
		{Name: "conv1.weight", DType: ckpt.DTypeF32, Shape: []int{n}, F32: w},
		{Name: "bn1.num_batches_tracked", DType: ckpt.DTypeI64, Shape: []int{}, I64: []int64{int64(len(writer))}},
	}
}

// A process killed (SIGKILL: no deferred cleanup runs) while it writes a
// checkpoint over an existing one leaves the existing one whole: the file
// reads back with a good checksum and holds either the old contents or a
// complete new version, and the stale temporary file does not confuse
// ckpt.List or the next write.
func TestKillDuringCheckpointWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	mp, op, sp := ckpt.Paths(dir, 3)
	old := crashTensors("parent", 1<<20)
	for _, p := range []string{mp, op, sp} {
		if err := ckpt.WriteFile(p, "model", map[string]any{"writer": "parent"}, old); err != nil {
			t.Fatal(err)
		}
	}
	for round, delay := range []time.Duration{0, 15 * time.Millisecond, 40 * time.Millisecond} {
		killMidWrite(t, mp, delay)
		meta, ts, err := ckpt.ReadFile(mp, "model")
		if err != nil {
			t.Fatalf("round %d: the checkpoint was damaged: %v", round, err)
		}
		writer, _ := ckpt.MetaString(meta, "writer")
		want := old
		if writer == "child" {
			want = crashTensors("child", 8<<20)
		}
		if writer == "" || !reflect.DeepEqual(ts, want) {
			t.Fatalf("round %d: file of writer %q holds other tensors than that writer wrote", round, writer)
		}
		t.Logf("round %d: the file holds the %s's version", round, writer)
	}
	temps, _ := filepath.Glob(mp + ".tmp-*")
	if len(temps) == 0 {
		t.Fatal("no temporary file left behind: the child was never killed mid-write")
	}
	if have, err := ckpt.List(dir); err != nil || !reflect.DeepEqual(have, []int{3}) {
		t.Fatalf("ckpt.List with stale %v = %v, %v; want [3]", temps, have, err)
	}
	if err := ckpt.WriteFile(mp, "model", map[string]any{"writer": "parent"}, old); err != nil {
		t.Fatalf("writing next to stale temporary files: %v", err)
	}
	if _, ts, err := ckpt.ReadFile(mp, "model"); err != nil || !reflect.DeepEqual(ts, old) {
		t.Fatalf("rewrite: %v", err)
	}
}

// killMidWrite starts the helper writer on path, waits until its
// temporary file appears, waits delay more, and SIGKILLs it.
func killMidWrite(t *testing.T, path string, delay time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), "RNL_HELPER_WRITER="+path)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	before, _ := filepath.Glob(path + ".tmp-*")
	deadline := time.Now().Add(30 * time.Second)
	for {
		now, _ := filepath.Glob(path + ".tmp-*")
		if len(now) > len(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the helper never started writing")
		}
		time.Sleep(200 * time.Microsecond)
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v (%s), not by SIGKILL", err, strconv.Quote(cmd.ProcessState.String()))
	}
}
