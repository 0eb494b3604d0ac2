package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"resnetlab/ckpt"
	"resnetlab/engine"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
	"resnetlab/model/torchfmt"
	"resnetlab/runner"
)

// saveRealCheckpoint writes, with the checkpoint code a run saves with, the
// checkpoint of a width-2 model (weights from seed) step steps into epoch
// (step 6, the whole epoch: its end) and returns the model's state dict.
func saveRealCheckpoint(t *testing.T, dir string, epoch, step int, seed uint64) []model.NamedTensor {
	t.Helper()
	cfg := model.Config{Width: 2, InChannels: 3, NumClasses: 10, DType: kernels.F32, Seed: seed}
	m := model.NewResNet18(cpu.New(), cfg)
	defer m.Free()
	sd := m.StateDict()
	for i := range sd { // the model's own buffers may be shared: keep copies
		sd[i].Data, sd[i].Int64 = slices.Clone(sd[i].Data), slices.Clone(sd[i].Int64)
	}
	st := &engine.State{Model: sd, Step: 6*(epoch-1) + step}
	for _, n := range ckpt.ParamLens(cfg) {
		st.ExpAvg = append(st.ExpAvg, make([]float32, n))
		st.ExpAvgSq = append(st.ExpAvgSq, make([]float32, n))
	}
	meta := ckpt.Meta{Epoch: epoch, Step: step, StepsPerEpoch: 6, Plugin: "torch_ddp", Precision: "fp32", World: 1,
		Width: 2, InChannels: 3, Classes: 10, Dataset: "synthetic", SynTest: 20, SynSeed: 5}
	if step < 6 {
		meta.Partial = &ckpt.PartialEpoch{LossSum: 2.3 * float64(step), Steps: step, Seconds: 1}
	}
	if _, err := ckpt.Save(dir, st, meta, model.ReferenceSchedule(1e-3)); err != nil {
		t.Fatal(err)
	}
	return sd
}

// eval and export take -e E@S, as run --resume does, and read the
// mid-epoch checkpoint model_E-stepS.pth; without -e they read the latest
// end of an epoch, as before.
func TestEvalExportMidEpochCheckpoint(t *testing.T) {
	dir := t.TempDir()
	end1 := saveRealCheckpoint(t, dir, 1, 6, 1)
	mid2 := saveRealCheckpoint(t, dir, 2, 3, 2)
	if slices.Equal(end1[0].Data, mid2[0].Data) {
		t.Fatal("the two checkpoints hold the same weights: the test could not tell them apart")
	}
	mid := filepath.Join(dir, "model_2-step3.pth")
	if have, err := ckpt.ListRefs(dir); err != nil || ckpt.JoinRefs(have) != "1, 2@3" {
		t.Fatalf("checkpoints %v (%v), want 1 and 2@3", have, err)
	}

	// eval, with the real evaluation on the CPU.
	for _, tc := range []struct {
		args  []string
		model string
		what  string
	}{
		{[]string{"-e", "2@3"}, mid, "epoch 2 step 3"},
		{[]string{"--epoch", "2@3"}, mid, "epoch 2 step 3"},
		{nil, filepath.Join(dir, "model_1.pth"), "epoch 1"},
	} {
		c, out, errb := testCLI()
		c.eval = runner.Eval
		args := append([]string{"eval", "-c", dir, "--device", "cpu"}, tc.args...)
		if code := runCLI(c, args...); code != exitOK {
			t.Fatalf("%v: code %d, stderr %q", args, code, errb)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if want := fmt.Sprintf("scored %s (%s) on synthetic", tc.model, tc.what); lines[len(lines)-1] != want ||
			!strings.HasPrefix(lines[0], "Accuracy of the model on the test images: ") {
			t.Errorf("%v: stdout\n%s\nwant it to end %q", args, out, want)
		}
	}
	c, _, _ := testCLI()
	var got runner.EvalOptions
	c.eval = func(_ context.Context, o runner.EvalOptions) (float64, []float64, error) {
		got = o
		return 0.5, nil, nil
	}
	if code := runCLI(c, "eval", "-c", dir, "-e", "2@3"); code != exitOK || got.Epoch != 2 || got.Step != 3 ||
		got.Dataset != "synthetic" {
		t.Errorf("eval -e 2@3: code %d, options %+v, want epoch 2 step 3 on synthetic", code, got)
	}

	// export writes the mid-epoch model's tensors, not the epoch end's.
	for _, tc := range []struct {
		e    []string
		want []model.NamedTensor
		file string // the model file the output line names
	}{{[]string{"-e", "2@3"}, mid2, "model_2-step3.pth"}, {[]string{"--epoch", "1"}, end1, "model_1.pth"}, {nil, end1, "model_1.pth"}} {
		out := filepath.Join(t.TempDir(), "m.safetensors")
		c, stdout, errb := testCLI()
		args := append([]string{"export", "-c", dir, "-o", out}, tc.e...)
		if code := runCLI(c, args...); code != exitOK {
			t.Fatalf("%v: code %d, stderr %q", args, code, errb)
		}
		if want := " from " + filepath.Join(dir, tc.file) + "\n"; !strings.HasSuffix(stdout.String(), want) {
			t.Errorf("%v: stdout %q, want it to end naming the model file exported (%q)", args, stdout, want)
		}
		ts, err := torchfmt.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !sameValues(ts, tc.want) {
			t.Errorf("%v: the exported tensors are not those of the checkpoint asked for", args)
		}
	}
}

// sameValues compares an export with the state dict it was made from.
func sameValues(ts []torchfmt.Tensor, sd []model.NamedTensor) bool {
	if len(ts) != len(sd) {
		return false
	}
	byName := map[string]model.NamedTensor{}
	for _, nt := range sd {
		byName[nt.Name] = nt
	}
	for _, x := range ts {
		nt, ok := byName[x.Name]
		if !ok || !slices.Equal(x.Shape, nt.Shape) || !slices.Equal(x.F32, nt.Data) || !slices.Equal(x.I64, nt.Int64) {
			return false
		}
	}
	return true
}

// A checkpoint -e names that is not there is one line naming the file and
// listing the checkpoints, mid-epoch ones too; a directory holding only
// mid-epoch checkpoints says so when -e is left out.
func TestEvalExportAbsentCheckpoint(t *testing.T) {
	dir, midOnly := t.TempDir(), t.TempDir()
	saveRealCheckpoint(t, dir, 1, 6, 1)
	saveRealCheckpoint(t, dir, 2, 3, 2)
	saveRealCheckpoint(t, midOnly, 1, 4, 1)
	absent := func(e, file string) string {
		return fmt.Sprintf("-e %s: no %s (checkpoints saved in %s: 1, 2@3)\n", e, filepath.Join(dir, file), dir)
	}
	only := fmt.Sprintf("no complete checkpoint (model_E.pth, optimizer_E.pth, lr_scheduler_E.pth) in %s, "+
		"only mid-epoch ones: 1@4 (name one with -e E@S)\n", midOnly)
	for _, cmd := range []string{"eval", "export"} {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"-c", dir, "-e", "2@4"}, absent("2@4", "model_2-step4.pth")},
			{[]string{"-c", dir, "-e", "1@3"}, absent("1@3", "model_1-step3.pth")},
			{[]string{"-c", dir, "-e", "2"}, absent("2", "model_2.pth")},
			{[]string{"-c", midOnly}, only},
		} {
			c, out, errb := testCLI()
			c.eval = runner.Eval
			args := append([]string{cmd}, tc.args...)
			if cmd == "export" {
				args = append(args, "-o", filepath.Join(t.TempDir(), "m.pth"))
			}
			if code := runCLI(c, args...); code != exitFailed || errb.String() != "resnetlab "+cmd+": "+tc.want || out.Len() > 0 {
				t.Errorf("%v: code %d, stdout %q, stderr %q; want code 1 and %q", args, code, out, errb, tc.want)
			}
		}
	}
}

// A bad -e is a one-line usage error (exit 2) naming the value, what -e
// takes and the directory, for eval and export alike.
func TestEvalExportBadEpoch(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range []string{"eval", "export"} {
		for _, v := range []string{"abc", "6@", "6@x", "6@0", "@3", "0", "-1", "6@17@2", "2.5", ""} {
			for _, flagName := range []string{"-e", "--epoch"} {
				args := []string{cmd, "-c", dir, flagName, v}
				if cmd == "export" {
					args = append(args, "-o", filepath.Join(dir, "m.pth"))
				}
				c, out, errb := testCLI()
				want := fmt.Sprintf("resnetlab %s: -e %q: want an epoch E or E@S (a checkpoint of %s)\n"+
					"Run 'resnetlab %s --help' for usage.\n", cmd, v, dir, cmd)
				if code := runCLI(c, args...); code != exitUsage || errb.String() != want || out.Len() > 0 {
					t.Errorf("%v: code %d, stdout %q, stderr %q; want code 2 and %q", args, code, out, errb, want)
				}
			}
		}
	}
}
