package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// launchGrace is how long the other processes of a failed world get to
// exit after SIGTERM before they are killed.
const launchGrace = 10 * time.Second

// cmdLaunch starts this node's ranks of a world of processes, each as
// `resnetlab run --headless SPEC` with torchrun's variables set, forwards
// SIGINT and SIGTERM to them, ends them all when one fails, and exits with
// the first failure's code (130 when interrupted).
func (c *cli) cmdLaunch(ctx context.Context, args []string) int {
	fs := newFlags("launch")
	nproc := fs.Int("nproc-per-node", 0, "")
	nnodes := fs.Int("nnodes", 1, "")
	nodeRank := fs.Int("node-rank", 0, "")
	addr := fs.String("master-addr", "127.0.0.1", "")
	port := fs.Int("master-port", 29500, "")
	pos, done, code := c.parseArgs(fs, launchUsage, args)
	if done {
		return code
	}
	switch {
	case len(pos) != 1:
		return c.usageError("launch", fmt.Sprintf("want one spec file, got %d arguments", len(pos)))
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
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab launch: cannot find this binary: %v\n", err)
		return exitFailed
	}
	w := &world{done: map[*exec.Cmd]bool{}}
	for i := range *nproc {
		env := map[string]int{"RANK": *nodeRank**nproc + i, "LOCAL_RANK": i, "WORLD_SIZE": *nnodes * *nproc,
			"LOCAL_WORLD_SIZE": *nproc, "GROUP_RANK": *nodeRank, "MASTER_PORT": *port}
		cmd := exec.Command(exe, "run", "--headless", pos[0])
		cmd.Env = append(os.Environ(), "MASTER_ADDR="+*addr)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+strconv.Itoa(v))
		}
		cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(c.stderr, "resnetlab launch: starting local rank %d: %v\n", i, err)
			w.signal(syscall.SIGKILL)
			w.wait()
			return exitFailed
		}
		w.procs = append(w.procs, cmd)
	}
	return w.supervise(ctx)
}

// world is the processes one launch started.
type world struct {
	procs []*exec.Cmd
	mu    sync.Mutex
	done  map[*exec.Cmd]bool // waited for: never signal a pid the system may reuse
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
func (w *world) supervise(ctx context.Context) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	type exit struct{ code int }
	exits := make(chan exit, len(w.procs))
	for _, p := range w.procs {
		go func() {
			err := p.Wait()
			w.mu.Lock()
			w.done[p] = true
			w.mu.Unlock()
			exits <- exit{exitCode(p, err)}
		}()
	}
	first, interrupted := 0, false
	var kill <-chan time.Time
	for left := len(w.procs); left > 0; {
		select {
		case e := <-exits:
			left--
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
