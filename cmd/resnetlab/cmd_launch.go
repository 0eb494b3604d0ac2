package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"resnetlab/ckpt"
	"resnetlab/comm"
	"resnetlab/runner"
	"resnetlab/spec"
)

// launchGrace is how long the other processes of a failed world get to
// exit after SIGTERM before they are killed.
const launchGrace = 10 * time.Second

// cmdLaunch starts this node's ranks of a world of processes, each as
// `resnetlab run --headless SPEC` with torchrun's variables set, forwards
// SIGINT and SIGTERM to them, ends them all when one fails, and exits with
// the first failure's code (130 when interrupted). On a terminal (and
// without --headless), node 0's rank 0 gets the terminal and runs the UI.
// The other local ranks' output is held and printed only when the first
// did not report the world's failure itself (heldOutput).
func (c *cli) cmdLaunch(ctx context.Context, args []string) int {
	fs := newFlags("launch")
	nproc := fs.Int("nproc-per-node", 0, "")
	nnodes := fs.Int("nnodes", 1, "")
	nodeRank := fs.Int("node-rank", 0, "")
	addr := fs.String("master-addr", "127.0.0.1", "")
	port := fs.Int("master-port", 29500, "")
	headless := fs.Bool("headless", false, "")
	var resume ckpt.Ref
	fs.Var(refFlag{&resume}, "resume", "")
	pos, done, code := c.parseArgs(fs, launchUsage, args)
	if done {
		return code
	}
	nprocSet := false
	fs.Visit(func(f *flag.Flag) { nprocSet = nprocSet || f.Name == "nproc-per-node" })
	switch {
	case len(pos) != 1:
		return c.usageError("launch", fmt.Sprintf("want one spec file, got %d arguments", len(pos)))
	case !nprocSet:
		return c.usageError("launch", "--nproc-per-node N is required: the number of ranks (processes) of this node, 1 to 1024")
	case *nproc < 1 || *nproc > 1024:
		return c.usageError("launch", fmt.Sprintf("--nproc-per-node %d: want the number of ranks of this node, 1 to 1024", *nproc))
	case *nnodes < 1 || *nnodes > 1<<16:
		return c.usageError("launch", fmt.Sprintf("--nnodes %d: want 1 or more", *nnodes))
	case *nodeRank < 0 || *nodeRank >= *nnodes:
		return c.usageError("launch", fmt.Sprintf("--node-rank %d: want 0 to %d (--nnodes %d)", *nodeRank, *nnodes-1, *nnodes))
	case *port < 1 || *port > 65535:
		return c.usageError("launch", fmt.Sprintf("--master-port %d: want 1 to 65535", *port))
	case *addr == "":
		return c.usageError("launch", "--master-addr \"\": want rank 0's host name or address")
	}
	if err := checkLaunchSpec(pos[0], *nnodes**nproc); err != nil {
		fmt.Fprintf(c.stderr, "resnetlab launch: %v\n", err)
		return exitFailed
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab launch: cannot find this binary: %v\n", err)
		return exitFailed
	}
	again := comm.LaunchVar + "=" + launchCommand(fs)
	w := &world{done: map[*exec.Cmd]bool{}, codes: map[*exec.Cmd]int{}}
	ui := !*headless && *nodeRank == 0 && c.tui != nil && c.isTTY()
	var held []*tailBuffer // the other local ranks' output, printed at the end if needed (heldOutput)
	for i := range *nproc {
		env := map[string]int{"RANK": *nodeRank**nproc + i, "LOCAL_RANK": i, "WORLD_SIZE": *nnodes * *nproc,
			"LOCAL_WORLD_SIZE": *nproc, "GROUP_RANK": *nodeRank, "MASTER_PORT": *port}
		cmd := exec.Command(exe, launchArgs(ui && i == 0, resume, pos[0])...)
		cmd.Env = append(os.Environ(), "MASTER_ADDR="+*addr, again)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+strconv.Itoa(v))
		}
		cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
		switch {
		case ui && i == 0:
			cmd.Stdin = os.Stdin
		case i > 0:
			b := &tailBuffer{max: launchHeld}
			held = append(held, b)
			cmd.Stdout, cmd.Stderr = b, b
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(c.stderr, "resnetlab launch: starting local rank %d: %v\n", i, err)
			w.signal(syscall.SIGKILL)
			w.wait()
			return exitFailed
		}
		w.procs = append(w.procs, cmd)
	}
	code = w.supervise(ctx)
	if heldOutput(w.codes[w.procs[0]]) {
		for _, b := range held {
			c.stderr.Write(b.bytes())
		}
	}
	return code
}

// heldOutput reports whether the other local ranks' output is printed,
// given how this node's first rank exited. That rank reports the world's
// outcome: a failure of any rank reaches it (a rank that fails aborts the
// world, naming itself and its error), and the others would print the
// same failure again, once per rank. Their output is printed when the
// first rank said nothing of a failure: it succeeded (what else they said
// may matter), or it was killed or ended otherwise.
func heldOutput(first int) bool {
	return first != exitFailed && first != exitInterrupted
}

// checkLaunchSpec refuses, before any process starts, a spec that every
// rank would refuse at once (each printing the same message): one that
// does not load, or whose grid is not exactly one run of the world's size.
func checkLaunchSpec(path string, world int) error {
	sp, err := spec.Load(path)
	if err != nil {
		return err
	}
	cells, _, err := sp.Cells()
	if err != nil {
		return err
	}
	return runner.CheckWorldGrid(sp.File, cells, runner.World{Size: world, Trains: "a launch",
		Started: fmt.Sprintf("--nproc-per-node x --nnodes starts a world of %d processes", world)})
}

// launchCommand is this launch's command line as the user gave it, quoted
// for a shell, less --resume and the spec: the ranks get it (comm.LaunchVar)
// to say how to go on after an interrupt (continue.go) and in the UI's
// refusal of a resume.
func launchCommand(fs *flag.FlagSet) string {
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	words := []string{"resnetlab", "launch"}
	for _, name := range []string{"nproc-per-node", "nnodes", "node-rank", "master-addr", "master-port"} {
		if v, ok := set[name]; ok {
			words = append(words, "--"+name, shellQuote(v))
		}
	}
	if set["headless"] == "true" {
		words = append(words, "--headless")
	}
	return strings.Join(words, " ")
}

// launchArgs is the command line of a rank: rank 0 with the UI runs
// without --headless (it still falls back to headless without a terminal);
// every rank resumes from resume when it is set (a world of processes
// resumes only as it starts, each rank from the same checkpoint).
func launchArgs(ui bool, resume ckpt.Ref, spec string) []string {
	args := []string{"run"}
	if !ui {
		args = append(args, "--headless")
	}
	if !resume.IsZero() {
		args = append(args, "--resume", resume.String())
	}
	return append(args, spec)
}

// launchHeld bounds what the launcher keeps of each other local rank's
// output until the world has ended: a failure's last lines.
const launchHeld = 64 << 10

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.b...)
}

// world is the processes one launch started.
type world struct {
	procs []*exec.Cmd
	mu    sync.Mutex
	done  map[*exec.Cmd]bool // waited for: never signal a pid the system may reuse
	codes map[*exec.Cmd]int  // exit codes of the processes waited for
}

func (w *world) signal(s os.Signal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.procs {
		if !w.done[p] {
			p.Process.Signal(s)
		}
	}
}

func (w *world) wait() {
	for _, p := range w.procs {
		p.Wait()
	}
}

// supervise waits for the processes; on the first failure it ends the
// others (SIGTERM, then SIGKILL after launchGrace) and returns its code.
// A rank that exits interrupted (130) is no failure to end the others
// for: the ranks stop together at a step (rank 0 may still be writing the
// checkpoint, or showing the finished run in its UI).
func (w *world) supervise(ctx context.Context) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	type exit struct{ code int }
	exits := make(chan exit, len(w.procs))
	for _, p := range w.procs {
		go func() {
			err := p.Wait()
			code := exitCode(p, err)
			w.mu.Lock()
			w.done[p], w.codes[p] = true, code
			w.mu.Unlock()
			exits <- exit{code}
		}()
	}
	first, interrupted := 0, false
	var kill <-chan time.Time
	for left := len(w.procs); left > 0; {
		select {
		case e := <-exits:
			left--
			if e.code == exitInterrupted { // the ranks agreed to stop: the others end by themselves
				interrupted = true
				continue
			}
			if e.code != 0 && first == 0 {
				first = e.code
				w.signal(syscall.SIGTERM)
				kill = time.After(launchGrace)
			}
		case s := <-sigs:
			interrupted = true
			w.signal(s)
		case <-ctx.Done():
			ctx = context.Background() // once: the signal itself arrives on sigs too
			interrupted = true
			w.signal(os.Interrupt)
		case <-kill:
			w.signal(syscall.SIGKILL)
		}
	}
	if interrupted {
		return exitInterrupted
	}
	return first
}

// exitCode is a finished process's exit status, 128+signal when a signal
// ended it.
func exitCode(p *exec.Cmd, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return exitFailed
	}
	if st, ok := p.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return 128 + int(st.Signal())
	}
	return p.ProcessState.ExitCode()
}
