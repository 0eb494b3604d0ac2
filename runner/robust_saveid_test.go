package runner

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"resnetlab/ckpt"
	"strings"
	"testing"
)

// twoSaves writes two checkpoints of epoch 1 at the same step from
// different states, in two directories.
func twoSaves(t *testing.T) (a, b string) {
	a, b = t.TempDir(), t.TempDir()
	writeTestCheckpoint(t, a, 1, testStateDict(t, 2, 1), syntheticMeta(2))
	writeTestCheckpoint(t, b, 1, testStateDict(t, 2, 2), syntheticMeta(2))
	return a, b
}

func saveIDOf(t *testing.T, path string) string {
	t.Helper()
	_, meta, err := ckpt.ReadMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ckpt.MetaString(meta, "save_id")
	if err != nil || len(id) != 32 {
		t.Fatalf("%s: save_id %q %v", path, id, err)
	}
	return id
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Files of two saves with the same epoch, step and steps per epoch (two
// runs writing one directory) are refused by resume and eval, naming both
// files and both save ids.
func TestMixedSavesRefusedBySaveID(t *testing.T) {
	a, b := twoSaves(t)
	amp, aop, _ := ckpt.Paths(a, 1)
	_, bop, _ := ckpt.Paths(b, 1)
	copyFile(t, bop, aop)
	want := "checkpoint of epoch 1 in " + a + " is a mix of two saves: model_1.pth has save id " + saveIDOf(t, amp) +
		", optimizer_1.pth has " + saveIDOf(t, bop) + " (a save was interrupted, or two runs wrote this directory"
	if err := ckpt.CheckSameSnapshot(a, ckpt.Ref{Epoch: 1}); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("resume check: got  %v\nwant %s...", err, want)
	}
	_, _, err := Eval(context.Background(), EvalOptions{CheckpointDir: a, Epoch: 1, Device: "cpu"})
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("eval: got  %v\nwant %s...", err, want)
	}
}

// asVersion1 rewrites a checkpoint file as the previous format wrote it:
// version 1, no save_id.
func asVersion1(t *testing.T, path, kind string) {
	t.Helper()
	meta, ts, err := ckpt.ReadFile(path, kind)
	if err != nil {
		t.Fatal(err)
	}
	delete(meta, "save_id")
	if err := ckpt.WriteFile(path, kind, meta, ts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[8:], 1)
	sum := sha256.Sum256(b[:len(b)-sha256.Size])
	copy(b[len(b)-sha256.Size:], sum[:])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint of the previous format version (no save id) still loads
// and scores; a version-1 file next to version-2 files of another save is
// a mix.
func TestVersion1CheckpointStillLoads(t *testing.T) {
	dir := t.TempDir()
	writeTestCheckpoint(t, dir, 1, testStateDict(t, 2, 1), syntheticMeta(2))
	mp, op, sp := ckpt.Paths(dir, 1)
	for path, kind := range map[string]string{mp: "model", op: "optimizer", sp: "lr_scheduler"} {
		asVersion1(t, path, kind)
	}
	if _, err := ckpt.Load(dir, ckpt.Ref{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if err := ckpt.CheckSameSnapshot(dir, ckpt.Ref{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Eval(context.Background(), EvalOptions{CheckpointDir: dir, Epoch: 1, Device: "cpu"}); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	writeTestCheckpoint(t, other, 1, testStateDict(t, 2, 1), syntheticMeta(2))
	omp, _, _ := ckpt.Paths(other, 1)
	copyFile(t, omp, mp)
	err := ckpt.CheckSameSnapshot(dir, ckpt.Ref{Epoch: 1})
	want := "model_1.pth has save id " + saveIDOf(t, omp) + ", optimizer_1.pth has none"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want ...%s", err, want)
	}
}
