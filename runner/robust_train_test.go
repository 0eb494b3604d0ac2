package runner

import (
	"errors"
	"os"
	"regexp"
	"resnetlab/report"
	"resnetlab/spec"
	"strconv"
	"strings"
	"testing"
)

// An fp32 run whose loss overflows stops at that step and names the first
// layer holding inf/NaN, keeps the checkpoints and result written so far,
// and writes a result file that says it failed (with null for non-finite
// numbers, since JSON has no NaN).
func TestDivergedFP32RunStopsWithStepAndLayer(t *testing.T) {
	s := tinySpec(t, "") // width 4
	// lr_max in a spec file is 10; set the absurd rate directly, as a bug
	// in a schedule would.
	s.LR = 1e30
	evs, err := collect(t, s, RunOptions{}, nil)
	if err == nil {
		t.Fatal("a run with lr 1e30 finished without error")
	}
	re := regexp.MustCompile(`torch_ddp-fp32-1: rank 0: loss is (NaN|[+-]Inf) at epoch 1 step ([0-9]+) ` +
		`\(fp32 has no loss scaler to skip it\): first non-finite (weights|gradient): ([a-z0-9_.]+)`)
	m := re.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q does not match %s", err, re)
	}
	step, _ := strconv.Atoi(m[2])
	if step < 2 {
		t.Fatalf("diverged at step 1, before any update: %v", err)
	}
	t.Logf("%v", err)
	rs := finished(t, evs)
	if len(rs) != 1 || rs[0].Status != "failed" || !strings.Contains(rs[0].Error, "loss is") {
		t.Fatalf("result %+v", rs)
	}
	b, rerr := os.ReadFile(report.ResultPath(s.ResultsDir, rs[0]))
	if rerr != nil || !strings.Contains(string(b), `"status": "failed"`) {
		t.Fatalf("result file: %v\n%s", rerr, b)
	}
	// Steps that ran were published, the last one with the bad loss absent.
	for _, e := range evs {
		if sd, ok := e.(StepDone); ok && sd.Step >= step {
			t.Fatalf("step %d was published, the run failed at step %d", sd.Step, step)
		}
	}
}

// Grids with nothing valid in them, and runs that would share a
// checkpoint directory, are refused before anything starts.
func TestSpecCombinationsRefused(t *testing.T) {
	cases := []struct {
		name, src string
		frag      []string
	}{
		{"all rejected", "[grid]\nplugin = [\"gemini\", \"low_level_zero\"]\nprecision = [\"fp32\"]\n",
			[]string{"t.toml: no valid runs: all 2 cells of the grid were rejected"}},
		{"ddp_fp16 in bf16", "[[run]]\nplugin = \"torch_ddp_fp16\"\nprecision = \"bf16\"\n",
			[]string{"no valid runs"}},
		{"shared dir", "checkpoint = \"./ck\"\n[grid]\nplugin = [\"torch_ddp\"]\ngpus = [1, 2]\n",
			[]string{"t.toml:1: key `checkpoint`: runs torch_ddp-fp32-1 and torch_ddp-fp32-2 would share checkpoint directory \"./ck\""}},
		{"more ranks than images", "dataset = \"synthetic\"\nbatch_size = 50\n[synthetic]\ntrain = 100\n[grid]\ngpus = [4]\n",
			[]string{"no valid runs"}},
	}
	for _, c := range cases {
		s, err := spec.ParseWithEnv("t.toml", []byte(c.src), noEnv)
		if err != nil {
			t.Fatalf("%s: parse: %v", c.name, err)
		}
		_, _, rejected, err := RunOptions{}.Apply(s)
		if err == nil {
			t.Fatalf("%s: accepted", c.name)
		}
		for _, f := range c.frag {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("%s: error %q lacks %q", c.name, err, f)
			}
		}
		var se *spec.Error
		if c.name == "shared dir" && !errors.As(err, &se) {
			t.Errorf("%s: not a *spec.Error: %v", c.name, err)
		}
		if c.name != "shared dir" && len(rejected) == 0 {
			t.Errorf("%s: no rejection says why", c.name)
		}
	}
}

func TestSpecWhere(t *testing.T) {
	s, err := spec.ParseWithEnv("t.toml", []byte("name = \"x\"\n\n[gemini]\ndevice_budget = \"1GiB\"\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"name": "t.toml:1", "gemini.device_budget": "t.toml:4", "checkpoint": "t.toml"} {
		if got := s.Where(key); got != want {
			t.Errorf("Where(%q) = %q, want %q", key, got, want)
		}
	}
}
