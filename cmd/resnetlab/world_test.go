package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"resnetlab/runner"
	specpkg "resnetlab/spec"
)

// TestMain lets the tests start this test binary as the resnetlab command
// (RESNETLAB_TEST_MAIN=1), one process per rank.
func TestMain(m *testing.M) {
	if os.Getenv("RESNETLAB_TEST_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := newCLI(os.Stdout, os.Stderr).main(ctx, os.Args[1:])
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// worldSpec is a tiny synthetic run of one plugin on world CPU ranks, its
// directories relative to the process's working directory.
func worldSpec(plugin string, world, epochs int) string {
	return fmt.Sprintf("name = \"w\"\ndataset = \"synthetic\"\nwidth = 4\nepochs = %d\nbatch_size = 10\ndevice = \"cpu\"\n"+
		"eval_every = 0\ncheckpoint = \"ck\"\nresults_dir = \"res\"\ninterval = 1\n"+
		"[[run]]\nplugin = %q\ngpus = %d\n[synthetic]\ntrain = 60\ntest = 20\nseed = 5\n", epochs, plugin, world)
}

func port(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

type proc struct {
	cmd            *exec.Cmd
	dir            string
	stdout, stderr bytes.Buffer
}

// startRank starts the test binary as `resnetlab run --headless w.toml` in
// its own directory holding spec; env are the launcher's variables (none:
// a plain run).
func startRank(t *testing.T, spec string, env ...string) *proc {
	t.Helper()
	return startCmd(t, spec, []string{"run", "--headless", "w.toml"}, env...)
}

// startCmd starts the test binary as resnetlab with args in a directory
// holding spec as w.toml.
func startCmd(t *testing.T, spec string, args []string, env ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.toml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return startIn(t, dir, args, env...)
}

// startIn starts the test binary as resnetlab with args in dir.
func startIn(t *testing.T, dir string, args []string, env ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{dir: dir}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Dir = p.dir
	p.cmd.Env = append(os.Environ(), append([]string{"RESNETLAB_TEST_MAIN=1"}, env...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

func rankEnv(r, world int, port string) []string {
	return []string{fmt.Sprintf("RANK=%d", r), fmt.Sprintf("LOCAL_RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", world),
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}
}

// startWorld starts world ranks, specs[r] for rank r.
func startWorld(t *testing.T, specs []string) []*proc {
	pt := port(t)
	ps := make([]*proc, len(specs))
	for r, s := range specs {
		ps[r] = startRank(t, s, rankEnv(r, len(specs), pt)...)
	}
	return ps
}

// waitAll waits for every process, at most limit in all, and returns the
// exit codes.
func waitAll(t *testing.T, ps []*proc, limit time.Duration) []int {
	t.Helper()
	codes := make([]int, len(ps))
	done := make(chan struct{})
	go func() {
		for i, p := range ps {
			p.cmd.Wait()
			codes[i] = p.cmd.ProcessState.ExitCode()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		for i, p := range ps {
			t.Logf("rank %d stderr:\n%s", i, p.stderr.String())
		}
		t.Fatalf("the processes were still running after %v", limit)
	}
	return codes
}

func modelSHA(t *testing.T, p *proc) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(p.dir, "res", "*.json"))
	if len(m) != 1 {
		t.Fatalf("results in %s: %v\nstdout:\n%s\nstderr:\n%s", p.dir, m, p.stdout.String(), p.stderr.String())
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ModelSHA256 string `json:"model_sha256"`
		Status      string `json:"status"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.ModelSHA256 == "" || r.Status != "done" {
		t.Fatalf("%s: %v %+v", m[0], err, r)
	}
	return r.ModelSHA256
}

// TestWorldOfProcessesEqualsOneProcess: 2 and 3 processes of one rank each
// train, for every plugin, the model one process trains with the same
// ranks as goroutines, bit for bit; only rank 0 writes.
func TestWorldOfProcessesEqualsOneProcess(t *testing.T) {
	for _, plugin := range []string{"torch_ddp", "low_level_zero", "gemini"} {
		for _, world := range []int{2, 3} {
			spec := worldSpec(plugin, world, 2)
			one := startRank(t, spec)
			ps := startWorld(t, []string{spec, spec, spec}[:world])
			codes := waitAll(t, append(ps, one), 60*time.Second)
			for i, c := range codes {
				if c != 0 {
					p := append(ps, one)[i]
					t.Fatalf("%s world %d: process %d exited %d:\n%s", plugin, world, i, c, p.stderr.String())
				}
			}
			want, got := modelSHA(t, one), modelSHA(t, ps[0])
			if got != want {
				t.Errorf("%s world %d: %d processes give model_sha256 %s, one process %s", plugin, world, world, got, want)
			}
			for r, p := range ps[1:] {
				if ents, _ := os.ReadDir(p.dir); len(ents) != 1 {
					t.Errorf("%s world %d: rank %d wrote %v (want only its spec)", plugin, world, r+1, ents)
				}
			}
			if !strings.Contains(ps[0].stdout.String(), "checkpoint of epoch 2 saved") {
				t.Errorf("%s world %d: rank 0 printed no checkpoint:\n%s", plugin, world, ps[0].stdout.String())
			}
		}
	}
}

// TestWorldKilledRankEndsTheOthers: a rank killed mid-run ends the others
// within 30 s with an error naming it.
func TestWorldKilledRankEndsTheOthers(t *testing.T) {
	spec := worldSpec("torch_ddp", 3, 100000)
	ps := startWorld(t, []string{spec, spec, spec})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(ps[0].stdout.String(), "loss ") { // training: a step was printed
		if time.Now().After(deadline) {
			t.Fatalf("no step after 20 s:\n%s", ps[0].stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ps[2].cmd.Process.Signal(syscall.SIGKILL)
	codes := waitAll(t, ps[:2], 30*time.Second)
	for r, c := range codes {
		msg := ps[r].stdout.String() + ps[r].stderr.String() // rank 0's FAILED line is on stdout
		if c == 0 || !strings.Contains(msg, "rank 2 (host") {
			t.Errorf("rank %d exited %d, output %q: want a failure naming rank 2", r, c, msg)
		}
	}
}

// waitStep waits until p has printed a training step.
func waitStep(t *testing.T, p *proc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stdout.String(), "loss ") {
		if time.Now().After(deadline) {
			t.Fatalf("no step after 20 s:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorldStoppedRankEndsTheOthers: a rank stopped mid-run (SIGSTOP: its
// sockets stay open, as for a hung process or a host cut off) ends the
// others within the peer timeout (RESNETLAB_PEER_TIMEOUT, 1 s here) with
// an error naming it: rank 2 through rank 0's heartbeat watch, rank 0
// through the others' unanswered heartbeats.
func TestWorldStoppedRankEndsTheOthers(t *testing.T) {
	spec := worldSpec("torch_ddp", 3, 100000)
	for _, stopped := range []int{2, 0} {
		pt := port(t)
		ps := make([]*proc, 3)
		for r := range ps {
			ps[r] = startRank(t, spec, append(rankEnv(r, 3, pt), "RESNETLAB_PEER_TIMEOUT=1s")...)
		}
		waitStep(t, ps[0])
		ps[stopped].cmd.Process.Signal(syscall.SIGSTOP)
		var rest []*proc
		for r, p := range ps {
			if r != stopped {
				rest = append(rest, p)
			}
		}
		codes := waitAll(t, rest, 15*time.Second)
		want := fmt.Sprintf("rank %d (host", stopped)
		for i, c := range codes {
			if msg := rest[i].stdout.String() + rest[i].stderr.String(); c == 0 || !strings.Contains(msg, want) {
				t.Errorf("rank %d stopped: another rank exited %d, output %q: want a failure naming it", stopped, c, msg)
			}
		}
		ps[stopped].cmd.Process.Kill()
	}
}

// TestWorldMissingRank: a rank that never arrives ends the others at the
// rendezvous timeout (RESNETLAB_RENDEZVOUS_TIMEOUT) naming it.
func TestWorldMissingRank(t *testing.T) {
	spec := worldSpec("torch_ddp", 3, 1)
	pt := port(t)
	ps := []*proc{startRank(t, spec, append(rankEnv(0, 3, pt), "RESNETLAB_RENDEZVOUS_TIMEOUT=1s")...),
		startRank(t, spec, append(rankEnv(1, 3, pt), "RESNETLAB_RENDEZVOUS_TIMEOUT=1s")...)}
	codes := waitAll(t, ps, 15*time.Second)
	for r, c := range codes {
		if msg := ps[r].stderr.String(); c != 1 || !strings.Contains(msg, "rank(s) 2 (never arrived)") {
			t.Errorf("rank %d exited %d, stderr %q: want it to name rank 2", r, c, msg)
		}
	}
	p := startRank(t, spec, append(rankEnv(1, 3, pt), "RESNETLAB_PEER_TIMEOUT=soon")...)
	if codes := waitAll(t, []*proc{p}, 10*time.Second); codes[0] != 1 || !strings.Contains(p.stderr.String(), `RESNETLAB_PEER_TIMEOUT="soon"`) {
		t.Errorf("a bad timeout: exit %d, %q", codes[0], p.stderr.String())
	}
}

// TestWorldRefusesAnotherSpec: a rank started with another spec is refused
// at the rendezvous, before anything trains, on every rank.
func TestWorldRefusesAnotherSpec(t *testing.T) {
	spec := worldSpec("torch_ddp", 2, 1)
	ps := startWorld(t, []string{spec, strings.Replace(spec, "seed = 5", "seed = 6", 1)})
	codes := waitAll(t, ps, 30*time.Second)
	for r, c := range codes {
		msg := ps[r].stderr.String()
		if c != 1 || !strings.Contains(msg, "rank 1 (host") || !strings.Contains(msg, "another spec or binary") {
			t.Errorf("rank %d exited %d, stderr %q: want the refusal of rank 1", r, c, msg)
		}
		if strings.Contains(ps[r].stdout.String(), "loss ") {
			t.Errorf("rank %d trained:\n%s", r, ps[r].stdout.String())
		}
	}
}

// TestWorldEnvErrors: a launcher variable missing or contradicting
// another is a one-line error naming it.
func TestWorldEnvErrors(t *testing.T) {
	spec := worldSpec("torch_ddp", 2, 1)
	for want, env := range map[string][]string{
		"LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT missing": {"RANK=0"},
		`RANK="2"`: {"RANK=2", "LOCAL_RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=x", "MASTER_PORT=1"},
		"RANK=1 conflicts with GROUP_RANK=1": {"RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=4", "MASTER_ADDR=x", "MASTER_PORT=1",
			"LOCAL_WORLD_SIZE=2", "GROUP_RANK=1"},
		"but MASTER_PORT is missing":                      {"SLURM_PROCID=1", "SLURM_LOCALID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=n[1-2]"},
		"gpus = 2, but the launcher started WORLD_SIZE=3": nil,
	} {
		if env == nil { // a world whose size the spec does not have
			pt := port(t)
			ps := []*proc{startRank(t, spec, rankEnv(0, 3, pt)...), startRank(t, spec, rankEnv(1, 3, pt)...), startRank(t, spec, rankEnv(2, 3, pt)...)}
			waitAll(t, ps, 30*time.Second)
			if msg := ps[0].stderr.String(); !strings.Contains(msg, want) {
				t.Errorf("world 3, gpus 2: stderr %q, want %q", msg, want)
			}
			continue
		}
		p := startRank(t, spec, env...)
		codes := waitAll(t, []*proc{p}, 10*time.Second)
		msg := p.stderr.String()
		if codes[0] != 1 || !strings.Contains(msg, want) || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
			t.Errorf("env %v: exit %d, stderr %q: want one line with %q", env, codes[0], msg, want)
		}
	}
}

// TestWorldInterruptStopsEveryRank: SIGINT to one rank stops every rank at
// the same step; rank 0 saves the checkpoint of the interrupted epoch.
func TestWorldInterruptStopsEveryRank(t *testing.T) {
	spec := worldSpec("low_level_zero", 2, 100000)
	ps := startWorld(t, []string{spec, spec})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(ps[0].stdout.String(), "loss ") {
		if time.Now().After(deadline) {
			t.Fatalf("no step after 20 s:\n%s", ps[0].stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ps[1].cmd.Process.Signal(os.Interrupt)
	codes := waitAll(t, ps, 30*time.Second)
	if codes[1] != exitInterrupted || codes[0] == 0 {
		t.Errorf("exit codes %v, want rank 1 %d and rank 0 a failure", codes, exitInterrupted)
	}
	if out := ps[0].stdout.String(); !strings.Contains(out, "saved in ck") {
		t.Errorf("rank 0 saved no checkpoint:\n%s\n%s", out, ps[0].stderr.String())
	}
	if !strings.Contains(ps[0].stderr.String(), "another rank of the world was interrupted") {
		t.Errorf("rank 0: %s", ps[0].stderr.String())
	}
}

// TestLaunch: resnetlab launch starts the world's processes itself and
// they train the in-process world's model; Ctrl-C to it stops them all
// with exit status 130.
func TestLaunch(t *testing.T) {
	spec := worldSpec("torch_ddp", 2, 1)
	one := startRank(t, spec)
	l := startCmd(t, spec, []string{"launch", "--nproc-per-node", "2", "--master-port", port(t), "w.toml"})
	if codes := waitAll(t, []*proc{one, l}, 60*time.Second); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("exit codes %v:\n%s\n%s", codes, one.stderr.String(), l.stderr.String())
	}
	if got, want := modelSHA(t, l), modelSHA(t, one); got != want {
		t.Errorf("launch gives model_sha256 %s, one process %s", got, want)
	}

	l = startCmd(t, worldSpec("torch_ddp", 3, 100000), []string{"launch", "--nproc-per-node", "3", "--master-port", port(t), "w.toml"})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(l.stdout.String(), "loss ") {
		if time.Now().After(deadline) {
			t.Fatalf("no step after 20 s:\n%s", l.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.cmd.Process.Signal(os.Interrupt)
	if codes := waitAll(t, []*proc{l}, 30*time.Second); codes[0] != exitInterrupted {
		t.Errorf("launch interrupted: exit %d, want %d:\n%s", codes[0], exitInterrupted, l.stderr.String())
	}
	if out := l.stdout.String(); !strings.Contains(out, "saved in ck") {
		t.Errorf("launch interrupted: rank 0 saved no checkpoint:\n%s", out)
	}
}

// TestLaunchResumes: launch --resume hands the checkpoint to every rank,
// and the world continues from it to the model of the uninterrupted run,
// bit for bit.
func TestLaunchResumes(t *testing.T) {
	spec := worldSpec("low_level_zero", 2, 2)
	l := startCmd(t, spec, []string{"launch", "--nproc-per-node", "2", "--master-port", port(t), "w.toml"})
	if codes := waitAll(t, []*proc{l}, 60*time.Second); codes[0] != 0 {
		t.Fatalf("exit %d:\n%s", codes[0], l.stderr.String())
	}
	want := modelSHA(t, l)
	r := startIn(t, l.dir, []string{"launch", "--nproc-per-node", "2", "--master-port", port(t), "--resume", "1", "w.toml"})
	if codes := waitAll(t, []*proc{r}, 60*time.Second); codes[0] != 0 {
		t.Fatalf("resumed launch: exit %d:\n%s", codes[0], r.stderr.String())
	}
	if out := r.stdout.String(); !strings.Contains(out, "resumed from") {
		t.Errorf("the resumed launch did not say it resumed:\n%s", out)
	}
	if got := modelSHA(t, r); got != want {
		t.Errorf("launch --resume 1 gives model_sha256 %s, the uninterrupted launch %s", got, want)
	}
}

// TestLaunchOnTerminal: on a terminal, launch starts rank 0 without
// --headless (here it has no terminal of its own, so it says so and runs
// headless) and holds the other ranks' output until they have ended.
func TestLaunchOnTerminal(t *testing.T) {
	dir := t.TempDir()
	spec := strings.NewReplacer(`"ck"`, fmt.Sprintf("%q", filepath.Join(dir, "ck")),
		`"res"`, fmt.Sprintf("%q", filepath.Join(dir, "res"))).Replace(worldSpec("torch_ddp", 2, 1))
	sp := filepath.Join(dir, "w.toml")
	if err := os.WriteFile(sp, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RESNETLAB_TEST_MAIN", "1")
	cl, out, errb := testCLI()
	cl.isTTY = func() bool { return true }
	cl.tui = func(context.Context, *specpkg.Spec, []specpkg.Cell, <-chan runner.Event, chan<- runner.Command) error {
		return nil // the launcher only asks whether there is one
	}
	code := runCLI(cl, "launch", "--nproc-per-node", "2", "--master-port", port(t), sp)
	if code != exitOK || strings.Count(errb.String(), "not a terminal; running headless") != 1 {
		t.Fatalf("exit %d, stderr %q: want rank 0 alone to try the UI", code, errb)
	}
	if !strings.Contains(out.String(), "peak memory: rank 0 device ") {
		t.Errorf("rank 0's output:\n%s", out)
	}
	b := &tailBuffer{max: 8}
	fmt.Fprint(b, "0123456789abc")
	if got := string(b.bytes()); got != "56789abc" {
		t.Errorf("tailBuffer kept %q", got)
	}
}

func TestLaunchFlags(t *testing.T) {
	for want, args := range map[string][]string{
		"--nproc-per-node N is required": {"launch", "w.toml"},
		"--nproc-per-node 0":             {"launch", "--nproc-per-node", "0", "w.toml"},
		"--node-rank 2":                  {"launch", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "2", "w.toml"},
		"want one spec file":             {"launch", "--nproc-per-node", "1"},
		"--master-port 70000":            {"launch", "--nproc-per-node", "1", "--master-port", "70000", "w.toml"},
		"-resume":                        {"launch", "--nproc-per-node", "1", "--resume", "x@", "w.toml"},
	} {
		var out, errb bytes.Buffer
		if code := newCLI(&out, &errb).main(context.Background(), args); code != exitUsage || !strings.Contains(errb.String(), want) {
			t.Errorf("%v: exit %d, %q, want %q", args, code, errb.String(), want)
		}
	}
}

// A spec that every rank would refuse is refused by the launcher itself,
// once, before it starts any process: a missing file, a grid of several
// runs, a run whose gpus is not the world's size.
func TestLaunchChecksSpecFirst(t *testing.T) {
	// Should the launcher start this test binary after all, it runs as
	// resnetlab (TestMain) rather than as the whole test suite again.
	t.Setenv("RESNETLAB_TEST_MAIN", "1")
	const base = "dataset = \"synthetic\"\nwidth = 4\nepochs = 1\ndevice = \"cpu\"\ncheckpoint = \"ck/{plugin}-{precision}-{gpus}\"\n"
	for want, c := range map[string]struct{ src, nproc string }{
		"file not found": {"", "2"},
		"a launch trains one run, but the grid has 4 (narrow plugin, precision and gpus to one run)": {
			base + "[grid]\nplugin = [\"torch_ddp\", \"torch_ddp_fp16\", \"low_level_zero\", \"gemini\"]\ngpus = [2]\n", "2"},
		"run gemini-fp16-1 has gpus = 1, but --nproc-per-node x --nnodes starts a world of 2 processes (make them equal)": {
			base + "[grid]\nplugin = [\"gemini\"]\n[gemini]\ndevice_budget = \"30MiB\"\n", "2"},
	} {
		sp := filepath.Join(t.TempDir(), "missing.toml")
		if c.src != "" {
			sp = writeSpec(t, c.src)
		}
		var out, errb bytes.Buffer
		code := newCLI(&out, &errb).main(context.Background(), []string{"launch", "--nproc-per-node", c.nproc, "--master-port", port(t), sp})
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		if code != exitFailed || len(lines) != 1 || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], filepath.Base(sp)) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and one line naming the spec and %q", sp, code, errb.String(), exitFailed, want)
		}
		if out.Len() != 0 {
			t.Errorf("%s: a process ran: stdout %q", sp, out.String())
		}
	}
}

// resultOf reads the one result file p wrote.
func resultOf(t *testing.T, p *proc) map[string]json.RawMessage {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(p.dir, "res", "*.json"))
	if len(m) != 1 {
		t.Fatalf("results in %s: %v\nstderr:\n%s", p.dir, m, p.stderr.String())
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]json.RawMessage
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestWorldReportsEveryRank: rank 0's result and headless output hold
// rank 1's own memory, which only rank 1's process measured: its peaks
// equal those of rank 1 in one process training the same ranks as
// goroutines, and its Gemini statistics are there.
func TestWorldReportsEveryRank(t *testing.T) {
	spec := worldSpec("gemini", 2, 2)
	one := startRank(t, spec)
	ps := startWorld(t, []string{spec, spec})
	for i, c := range waitAll(t, append(ps, one), 60*time.Second) {
		if c != 0 {
			t.Fatalf("process %d exited %d:\n%s", i, c, append(ps, one)[i].stderr.String())
		}
	}
	var want, got struct {
		Device []int64 `json:"peak_device_bytes_per_rank"`
		Host   []int64 `json:"peak_host_bytes_per_rank"`
		Gemini []struct {
			Rank, Steps int
			H2D         int64 `json:"h2d_bytes"`
		} `json:"gemini_memstats_per_rank"`
	}
	for p, v := range map[*proc]any{one: &want, ps[0]: &got} {
		b, _ := json.Marshal(resultOf(t, p))
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	if len(got.Device) != 2 || got.Device[1] == 0 || got.Host[1] == 0 {
		t.Fatalf("rank 0's result has no peaks of rank 1: device %v host %v", got.Device, got.Host)
	}
	if got.Device[1] != want.Device[1] {
		t.Errorf("rank 1's peak device bytes: %d in the world, %d in one process", got.Device[1], want.Device[1])
	}
	if len(got.Gemini) != 2 || got.Gemini[1].Rank != 1 || got.Gemini[1].Steps != want.Gemini[1].Steps {
		t.Errorf("gemini statistics per rank %+v, one process %+v", got.Gemini, want.Gemini)
	}
	out := ps[0].stdout.String()
	if !strings.Contains(out, "peak memory: rank 0 device ") || !strings.Contains(out, "; rank 1 device ") ||
		strings.Contains(out, "rank 1 device -") {
		t.Errorf("rank 0's output names no peak of rank 1:\n%s", out)
	}
}

// TestWorldRankZeroUI: rank 0 of a world, on a terminal, runs the UI (a
// fake here, in this process; rank 1 is a process of its own). The UI
// sees rank 1's memory, and its quit ends both ranks at the same step
// with 130, rank 0 checkpointing first.
func TestWorldRankZeroUI(t *testing.T) {
	dir := t.TempDir()
	spec := strings.NewReplacer(`"ck"`, fmt.Sprintf("%q", filepath.Join(dir, "ck")),
		`"res"`, fmt.Sprintf("%q", filepath.Join(dir, "res"))).Replace(worldSpec("low_level_zero", 2, 100000))
	pt := port(t)
	one := startRank(t, spec, rankEnv(1, 2, pt)...)
	for _, kv := range rankEnv(0, 2, pt) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	sp := filepath.Join(dir, "w.toml")
	if err := os.WriteFile(sp, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cl, _, errb := testCLI()
	cl.isTTY = func() bool { return true }
	cl.runSpec = runner.RunSpec
	sawRank1, savedOnQuit := false, false
	cl.tui = func(ctx context.Context, s *specpkg.Spec, cells []specpkg.Cell, ev <-chan runner.Event, cmds chan<- runner.Command) error {
		for e := range ev {
			if u, ok := e.(runner.MemoryUsage); ok && u.Rank == 1 && u.DevicePeak > 0 {
				sawRank1 = true
				break
			}
		}
		cmds <- runner.Quit{Checkpoint: true}
		for e := range ev {
			switch e.(type) {
			case runner.CheckpointSaved:
				savedOnQuit = true
			case runner.RunFinished:
				return nil
			}
		}
		return nil
	}
	code := runCLI(cl, "run", sp)
	codes := waitAll(t, []*proc{one}, 30*time.Second)
	if code != exitInterrupted || codes[0] != exitInterrupted {
		t.Fatalf("exit codes: rank 0 %d, rank 1 %d, want %d:\n%s\n%s", code, codes[0], exitInterrupted, errb, one.stderr.String())
	}
	if !sawRank1 {
		t.Error("the UI saw no memory of rank 1")
	}
	if !savedOnQuit {
		t.Error("rank 0 saved no checkpoint on quit")
	}
}

// A failing run's error is printed once, by one process and one layer:
// not again under the table, on the last stderr line (which names the
// failed run) nor by the launch's other rank. Before, a launch of two
// ranks printed it four times.
func TestLaunchPrintsAFailureOnce(t *testing.T) {
	t.Setenv("RESNETLAB_TEST_MAIN", "1")
	const why = "is below target_acc 99.00%"
	for name, c := range map[string]struct {
		gpus int
		args []string
	}{
		"run":    {1, []string{"run", "--headless", "w.toml"}},
		"launch": {2, []string{"launch", "--nproc-per-node", "2", "--master-port", port(t), "w.toml"}},
	} {
		spec := strings.Replace(worldSpec("torch_ddp", c.gpus, 1), "interval = 1\n", "interval = 1\ntarget_acc = 0.99\n", 1)
		p := startCmd(t, spec, c.args)
		if codes := waitAll(t, []*proc{p}, 60*time.Second); codes[0] != exitFailed {
			t.Fatalf("%s: exit %d, want %d:\n%s", name, codes[0], exitFailed, p.stderr.String())
		}
		all := p.stdout.String() + p.stderr.String()
		if n := strings.Count(all, why); n != 1 {
			t.Errorf("%s: the error is printed %d times, want once:\n%s", name, n, all)
		}
		id := fmt.Sprintf("torch_ddp-fp32-%d", c.gpus)
		if want := "resnetlab " + name + ": 1 of 1 run failed: " + id; !strings.Contains(p.stderr.String(), want) {
			t.Errorf("%s: stderr %q lacks %q", name, p.stderr.String(), want)
		}
	}
}

// TestWorldSizeMismatchRefusedAtOnce: a rank whose WORLD_SIZE is not the
// spec's gpus says so at once, on one line naming it, before the
// rendezvous: it does not wait out the rendezvous timeout (5 minutes
// here) for ranks the launcher never started.
func TestWorldSizeMismatchRefusedAtOnce(t *testing.T) {
	spec := worldSpec("torch_ddp", 2, 1)
	pt := port(t)
	ps := []*proc{startRank(t, spec, rankEnv(0, 3, pt)...), startRank(t, spec, rankEnv(1, 3, pt)...)}
	codes := waitAll(t, ps, 10*time.Second)
	for r, c := range codes {
		msg := strings.TrimSpace(ps[r].stderr.String())
		want := fmt.Sprintf("resnetlab run: rank %d (host ", r)
		if c != exitFailed || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, want) ||
			!strings.Contains(msg, "w.toml: run torch_ddp-fp32-2 has gpus = 2, but the launcher started WORLD_SIZE=3 processes") {
			t.Errorf("rank %d: exit %d, stderr %q: want one line naming it and the sizes", r, c, msg)
		}
	}
}

// TestWorldRendezvousErrorsOneLine: a rank with no rank 0, and rank 0
// with no other rank, end at the rendezvous timeout with one line each:
// what they waited for, how long, and the last cause.
func TestWorldRendezvousErrorsOneLine(t *testing.T) {
	spec := worldSpec("torch_ddp", 2, 1)
	pt := port(t)
	one := startRank(t, spec, append(rankEnv(1, 2, pt), "RESNETLAB_RENDEZVOUS_TIMEOUT=500ms")...)
	codes := waitAll(t, []*proc{one}, 10*time.Second)
	msg := strings.TrimSpace(one.stderr.String())
	if want := "rank 1 (host "; codes[0] != exitFailed || strings.Contains(msg, "\n") || !strings.Contains(msg, want) ||
		!strings.Contains(msg, "store at MASTER_ADDR:MASTER_PORT 127.0.0.1:"+pt+": gave up after 500ms (last: connection refused)") {
		t.Errorf("rank 1 alone: exit %d, stderr %q: want one line with the address, the wait and the refusal", codes[0], msg)
	}
	zero := startRank(t, spec, append(rankEnv(0, 2, pt), "RESNETLAB_RENDEZVOUS_TIMEOUT=500ms")...)
	codes = waitAll(t, []*proc{zero}, 10*time.Second)
	msg = strings.TrimSpace(zero.stderr.String())
	if codes[0] != exitFailed || strings.Contains(msg, "\n") || !strings.Contains(msg, "rank 0 (host ") ||
		!strings.Contains(msg, "waited on port "+pt+" for rank(s) 1 (never arrived): gave up after 500ms") {
		t.Errorf("rank 0 alone: exit %d, stderr %q: want one line naming rank 1 and the wait", codes[0], msg)
	}
}

// TestLaunchInterruptedSaysHowToContinue: an interrupted launch says, as
// run does, which checkpoint the run has and the command that goes on
// from it, the launch's own; its last line names launch. That command
// continues the world to the model of an uninterrupted run, bit for bit.
func TestLaunchInterruptedSaysHowToContinue(t *testing.T) {
	spec := worldSpec("low_level_zero", 2, 24)
	one := startRank(t, spec)
	l := startCmd(t, spec, []string{"launch", "--nproc-per-node", "2", "--master-port", port(t), "--headless", "w.toml"})
	waitStep(t, l)
	l.cmd.Process.Signal(os.Interrupt)
	if codes := waitAll(t, []*proc{l}, 30*time.Second); codes[0] != exitInterrupted {
		t.Fatalf("launch interrupted: exit %d, want %d:\n%s", codes[0], exitInterrupted, l.stderr.String())
	}
	out, errs := l.stdout.String(), l.stderr.String()
	m := regexp.MustCompile(`(?m)^low_level_zero-fp16-2 was interrupted; its last checkpoint, of epoch \d+( step \d+)?, is in ck\. To continue it:\n` +
		`    (resnetlab launch --nproc-per-node 2 --master-port \d+ --headless --resume \d+(@\d+)? w\.toml)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the interrupted launch says no command that goes on:\n%s", out)
	}
	if lines := strings.Split(strings.TrimSpace(errs), "\n"); lines[len(lines)-1] != "resnetlab launch: interrupted" || strings.Contains(errs, "resnetlab run") {
		t.Errorf("the interrupted launch's stderr names run, or does not end with its own last word:\n%s", errs)
	}
	if err := one.cmd.Wait(); err != nil {
		t.Fatalf("the uninterrupted run: %v\n%s", err, one.stderr.String())
	}
	r := startIn(t, l.dir, strings.Fields(m[2])[1:])
	if codes := waitAll(t, []*proc{r}, 60*time.Second); codes[0] != 0 {
		t.Fatalf("%s: exit %d:\n%s", m[2], codes[0], r.stderr.String())
	}
	if got, want := modelSHA(t, r), modelSHA(t, one); got != want {
		t.Errorf("%s gives model_sha256 %s, the uninterrupted run %s", m[2], got, want)
	}
}
