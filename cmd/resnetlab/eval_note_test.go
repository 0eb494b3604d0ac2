package main

import (
	"context"
	"path/filepath"
	"testing"

	"resnetlab/runner"
)

// A model scored on another data set than the one its file records gets a
// one-line note on stderr (not an error); the same set, by any of its
// names, or a file that records none, gets none.
func TestEvalNotesAnotherDataset(t *testing.T) {
	dir, bare := t.TempDir(), t.TempDir()
	saveCheckpoint(t, dir, 3, map[string]any{"dataset": "synthetic"})
	saveCheckpoint(t, bare, 3, map[string]any{})
	note := "resnetlab eval: note: " + filepath.Join(dir, "model_3.pth") + " was trained on synthetic; scoring it on cifar10\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", dir, "--dataset", "cifar10"}, note},
		{[]string{"-c", dir, "--dataset", "synth"}, ""},
		{[]string{"-c", dir}, ""},
		{[]string{"-c", bare, "--dataset", "cifar10"}, ""},
	} {
		c, out, errb := testCLI()
		c.eval = func(context.Context, runner.EvalOptions) (float64, []float64, error) { return 0.1, nil, nil }
		if code := runCLI(c, append([]string{"eval"}, tc.args...)...); code != exitOK || errb.String() != tc.want || out.Len() == 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want stderr %q", tc.args, code, out, errb, tc.want)
		}
	}
}
