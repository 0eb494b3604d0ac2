package runner

import (
	"resnetlab/spec"
	"strings"
	"testing"
	"time"

	"resnetlab/comm"
	"resnetlab/device"
	"resnetlab/engine"
	"resnetlab/kernels"
)

func TestPlanComm(t *testing.T) {
	cpuAuto := device.CPUPlan(2, "no CUDA GPU (cuda: cannot load libcuda.so.1): training on the CPU backend")
	shared := device.Plan{Kind: "cuda", Devices: []int{0, 0}}
	own := device.Plan{Kind: "cuda", Devices: []int{0, 1}}
	cases := []struct {
		comm string
		plan device.Plan
		want string // the kind, or a piece of the error
	}{
		{"auto", device.CPUPlan(1, ""), commHost},
		{"host", cpuAuto, commHost},
		{"device", cpuAuto, "t.toml:2: key `comm`: \"device\" needs GPU ranks, but this run trains on the CPU (no CUDA GPU"},
		{"nccl", cpuAuto, "(want \"auto\" or \"host\")"},
		{"auto", shared, commDevice},
		{"device", own, commDevice},
		{"host", shared, commStaged},
		{"nccl", own, commNCCL},
		{"nccl", shared, "t.toml:2: key `comm`: \"nccl\" needs one GPU per rank, but the run's 2 ranks share 1 GPU(s)"},
	}
	for _, c := range cases {
		s := mustParse(t, "\ncomm = \""+c.comm+"\"\n")
		j := &job{spec: s, plan: c.plan}
		got, err := j.planComm()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("comm %q on %+v: got %q, want %q", c.comm, c.plan, got, c.want)
		}
	}
}

// A run says which communicator it uses, in the log and the result.
func TestRunLogsComm(t *testing.T) {
	s := tinySpec(t, "comm = \"host\"\n[[run]]\nplugin = \"torch_ddp\"\ngpus = 2")
	s.Epochs = 1
	evs, err := collect(t, s, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	logged := false
	for _, e := range evs {
		if l, ok := e.(Log); ok && strings.HasPrefix(l.Text, "comm: host (2 CPU rank(s)") {
			logged = true
		}
	}
	if !logged {
		t.Error("no log line names the communicator")
	}
	if rs := finished(t, evs); len(rs) != 1 || rs[0].Comm != commHost {
		t.Errorf("result comm: %+v", rs)
	}
}

// The device communicator's wiring (setup, steps, the collective Free in
// close), on CPU ranks, which the spec does not allow but DeviceComm runs
// on: the same path GPU runs take. Gemini and ZeRO-2 over it give the
// host comm's states bit for bit with 2 ranks.
func TestDeviceCommWiring(t *testing.T) {
	for _, plugin := range []string{spec.PluginLowLevelZero, spec.PluginGemini} {
		extra := "[[run]]\nplugin = \"" + plugin + "\"\ngpus = 2\n[zero]\nstage = 2"
		var states []*engine.State
		for _, kind := range []string{commHost, commDevice} {
			s, cells, _, err := RunOptions{}.Apply(tinySpec(t, extra))
			if err != nil {
				t.Fatal(err)
			}
			train, test, err := loadData(s)
			if err != nil {
				t.Fatal(err)
			}
			j := &job{spec: s, cell: cells[0], train: train, test: test, precision: kernels.F16,
				plan: device.CPUPlan(2, ""), commKind: kind}
			if err := j.setup(); err != nil {
				t.Fatal(err)
			}
			if _, ok := j.ranks[1].comm.(*comm.DeviceComm); ok != (kind == commDevice) {
				t.Fatalf("%s: rank 1 got %T", kind, j.ranks[1].comm)
			}
			for j.step = 0; j.step < 3; j.step++ {
				if err := j.trainStep(2e-3); err != nil {
					t.Fatal(err)
				}
			}
			st, err := j.gatherState()
			if err != nil {
				t.Fatal(err)
			}
			states = append(states, st)
			closed := make(chan struct{})
			go func() { j.close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s %s: close did not return (a collective Free waiting for a rank?)", plugin, kind)
			}
		}
		for i := range states[0].Model {
			a, b := states[0].Model[i], states[1].Model[i]
			for k := range a.Data {
				if a.Data[k] != b.Data[k] {
					t.Fatalf("%s: %s[%d] is %v over DeviceComm, %v over the host comm", plugin, a.Name, k, b.Data[k], a.Data[k])
				}
			}
		}
	}
}

func noEnv(string) string { return "" }

// mustParse parses a test spec with no environment (DATA unset).
func mustParse(t *testing.T, src string) *spec.Spec {
	t.Helper()
	s, err := spec.ParseWithEnv("t.toml", []byte(src), noEnv)
	if err != nil {
		t.Fatalf("parse:\n%s\nerror: %v", src, err)
	}
	return s
}
