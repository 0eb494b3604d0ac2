package main

import (
	"testing"

	"resnetlab/ckpt"
	"resnetlab/runner"
	"resnetlab/spec"
)

func TestTUIOptions(t *testing.T) {
	sp, err := spec.Parse("x.toml", []byte("name = \"x\"\ncheckpoint = \"ck/{plugin}\"\n[grid]\nplugin = [\"torch_ddp\", \"gemini\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cells, _, err := sp.Cells()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cells[1].CheckpointDir = dir
	saveCheckpoint(t, dir, 5, nil)
	cmds := make(chan runner.Command, 1)
	o := tuiOptions(sp, cells, nil, cmds)
	if len(o.Runs) != 2 || o.Runs[1].ID != "gemini-fp16-1" || o.Runs[1].Epochs != 80 || o.Runs[1].CheckpointDir != dir {
		t.Fatalf("runs %+v", o.Runs)
	}
	if got := o.Checkpoints("gemini-fp16-1"); len(got) != 1 || got[0] != (ckpt.Ref{Epoch: 5}) {
		t.Fatalf("checkpoints %v", got)
	}
	if got := o.Checkpoints("torch_ddp-fp32-1"); len(got) != 0 {
		t.Fatalf("no checkpoints expected, got %v", got)
	}
	o.Send("gemini-fp16-1", runner.Pause{})
	o.Send("gemini-fp16-1", runner.Resume{}) // buffer full: dropped, not blocking
	if c := <-cmds; c != (runner.To{Run: "gemini-fp16-1", Cmd: runner.Pause{}}) {
		t.Fatalf("got %#v", c)
	}
	if startTUI == nil {
		t.Fatal("the TUI is not wired in")
	}
}
