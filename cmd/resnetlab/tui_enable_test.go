package main

import (
	"testing"

	"resnetlab/ckpt"
	"resnetlab/comm"
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

// In a rank that resnetlab launch started, the UI's resume hint is the
// launch's command line (comm.LaunchVar); elsewhere it is resnetlab run's.
func TestTUIRelaunchIsTheLaunchCommand(t *testing.T) {
	if got := relaunch(); got != "" {
		t.Fatalf("outside a launch: relaunch %q, want none", got)
	}
	for k, v := range map[string]string{"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
		"MASTER_PORT": "29500", comm.LaunchVar: "resnetlab launch --nproc-per-node 2"} {
		t.Setenv(k, v)
	}
	if got := relaunch(); got != "resnetlab launch --nproc-per-node 2" {
		t.Fatalf("in a launch: relaunch %q, want the launch's command line", got)
	}
}
