package runner

import (
	"strings"
	"testing"
)

func TestPlanComm(t *testing.T) {
	cpuAuto := cpuPlan(2, "no CUDA GPU (cuda: cannot load libcuda.so.1): training on the CPU backend")
	shared := backendPlan{kind: "cuda", devices: []int{0, 0}}
	own := backendPlan{kind: "cuda", devices: []int{0, 1}}
	cases := []struct {
		comm string
		plan backendPlan
		want string // the kind, or a piece of the error
	}{
		{"auto", cpuPlan(1, ""), commHost},
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
