package tui

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/runner"
)

// fakeRunner plays a grid of runs the way the real runner does (sequential
// runs, events at step boundaries) and honours the commands the TUI sends.
// Like runner.RunSpec with StayOpen, it re-opens a finished run on
// ResumeFrom once the grid is over (RunQueued, then the run again from
// that epoch).
// Every value it emits is a function of (run, epoch, step), so a script of
// events is reproducible; only its pacing depends on the clock.
type fakeRunner struct {
	t     testing.TB
	root  string // working directory of the fake: checkpoints go to root/ckpt/<run>/
	runs  []runner.RunInfo
	delay time.Duration // pause after each step
	halt  haltAt        // stop emitting here (golden screens), zero = never
	// reopenHalt is halt for a run re-opened by ResumeFrom.
	reopenHalt haltAt
	replaying  bool // a re-opened run plays (used by the play goroutine only)
	reopen     chan reopenReq
	every      int // checkpoint interval in epochs, 0 = never
	out        chan runner.Event
	quit       chan struct{}

	mu      sync.Mutex
	sent    []sentCmd
	cmds    map[string]chan runner.Command
	emitted int
	halted  bool
	ended   map[string]bool // runs that sent RunFinished
	clock   time.Time       // fixed log clock: one second per log line
}

type sentCmd struct {
	run string
	cmd runner.Command
}

type reopenReq struct {
	run   runner.RunInfo
	epoch int
}

// haltAt names the step after which the fake stops emitting and waits.
type haltAt struct {
	run         string
	epoch, step int
}

// stopErr ends a run's script early (Stop or the test ending).
type stopErr struct{ checkpoint, quit bool }

func (stopErr) Error() string { return "stopped" }

// quitErr ends a run and the grid (Quit): recorded interrupted.
type quitErr struct{}

func (quitErr) Error() string { return "interrupted: the grid was quit" }

// restartErr restarts a run from a saved epoch (ResumeFrom).
type restartErr struct{ epoch int }

func (restartErr) Error() string { return "restart" }

// ckptDir is a run's checkpoint directory as the runner reports it:
// relative to its working directory, like the spec's checkpoint key.
func ckptDir(run string) string { return filepath.Join("ckpt", run) }

func testGrid() []runner.RunInfo {
	mk := func(plugin, prec string, ranks int, dev []string) runner.RunInfo {
		id := fmt.Sprintf("%s-%s-%d", plugin, prec, ranks)
		return runner.RunInfo{ID: id, Spec: "zero", Plugin: plugin, Precision: prec, WorldSize: ranks,
			Dataset: "synthetic", Epochs: 4, Backend: "cuda", Devices: dev, StepsPerEpoch: 20,
			CheckpointDir: ckptDir(id)}
	}
	return []runner.RunInfo{
		mk("torch_ddp", "fp32", 1, []string{"NVIDIA H200"}),
		mk("gemini", "fp16", 2, []string{"NVIDIA H200", "NVIDIA H200"}),
		mk("low_level_zero", "fp16", 2, []string{"NVIDIA H200", "NVIDIA H200"}),
	}
}

func newFakeRunner(t testing.TB, delay time.Duration) *fakeRunner {
	f := &fakeRunner{t: t, root: t.TempDir(), runs: testGrid(), delay: delay, every: 2,
		out: make(chan runner.Event), quit: make(chan struct{}), cmds: map[string]chan runner.Command{},
		reopen: make(chan reopenReq, 8), ended: map[string]bool{},
		clock: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	for _, r := range f.runs {
		f.cmds[r.ID] = make(chan runner.Command, 64)
	}
	t.Cleanup(func() { close(f.quit) })
	return f
}

func (f *fakeRunner) options() Options {
	return Options{Title: "zero experiments/zero.toml", Runs: f.runs, Events: f.out,
		Send: f.Send, Checkpoints: f.Checkpoints}
}

// Send records the command and queues it for the run; it never blocks.
func (f *fakeRunner) Send(run string, c runner.Command) bool {
	f.mu.Lock()
	f.sent = append(f.sent, sentCmd{run, c})
	ch := f.cmds[run]
	ended := f.ended[run]
	f.mu.Unlock()
	if q, ok := c.(runner.Quit); ok && run == "" { // to the grid: every run's queue
		for _, info := range f.runs {
			f.cmds[info.ID] <- q
		}
		return true
	}
	if rf, ok := c.(runner.ResumeFrom); ok && ended {
		for _, info := range f.runs {
			if info.ID == run {
				f.reopen <- reopenReq{info, rf.Epoch}
			}
		}
		return true
	}
	select {
	case ch <- c:
	default:
		f.t.Errorf("command queue of %s full", run)
	}
	return true
}

func (f *fakeRunner) commands() []sentCmd {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentCmd(nil), f.sent...)
}

// Checkpoints lists the checkpoints whose three files exist, as the real
// front end does.
func (f *fakeRunner) Checkpoints(run string) []ckpt.Ref {
	refs, _ := ckpt.ListRefs(filepath.Join(f.root, ckptDir(run)))
	return refs
}

// state reports how many events went out and whether the fake has halted.
func (f *fakeRunner) state() (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.emitted, f.halted
}

func (f *fakeRunner) start() { go f.play() }

func (f *fakeRunner) play() {
	for _, info := range f.runs {
		if f.emit(runner.RunQueued{Info: info}) != nil {
			return
		}
	}
	for _, info := range f.runs {
		if f.playRun(info, 0) != nil {
			return // stopped: the grid ends here
		}
	}
	for {
		select {
		case rq := <-f.reopen:
			f.mu.Lock()
			f.ended[rq.run.ID] = false
			f.mu.Unlock()
			f.replaying = true
			if f.emit(runner.RunQueued{Info: rq.run}) != nil || f.playRun(rq.run, rq.epoch) != nil {
				return
			}
		case <-f.quit:
			return
		}
	}
}

// emit sends one event unless the test is over.
func (f *fakeRunner) emit(ev runner.Event) error {
	select {
	case f.out <- ev:
		f.mu.Lock()
		f.emitted++
		f.mu.Unlock()
		return nil
	case <-f.quit:
		return stopErr{quit: true}
	}
}

func (f *fakeRunner) log(run string, level runner.Level, text string) error {
	f.mu.Lock()
	f.clock = f.clock.Add(time.Second)
	ts := f.clock
	f.mu.Unlock()
	return f.emit(runner.Log{Run: run, Time: ts, Level: level, Text: text})
}

func (f *fakeRunner) playRun(info runner.RunInfo, start int) error {
	for {
		err := f.epochs(info, start)
		if r, ok := err.(restartErr); ok {
			start = r.epoch
			continue
		}
		if s, ok := err.(stopErr); ok && !s.quit {
			return f.finish(info, "stopped", err)
		}
		if _, ok := err.(quitErr); ok {
			return f.finish(info, report.StatusInterrupted, err)
		}
		if err != nil {
			return err
		}
		return f.finish(info, "done", nil)
	}
}

func (f *fakeRunner) epochs(info runner.RunInfo, start int) error {
	if err := f.emit(runner.RunStarted{Info: info, StartEpoch: start}); err != nil {
		return err
	}
	if err := f.log(info.ID, "info", fmt.Sprintf("%s: %s x %s on %d rank(s)", info.ID, info.Plugin, info.Precision, info.WorldSize)); err != nil {
		return err
	}
	for ep := start + 1; ep <= info.Epochs; ep++ {
		for s := 1; s <= info.StepsPerEpoch; s++ {
			if err := f.step(info, ep, s); err != nil {
				return err
			}
		}
		if err := f.endEpoch(info, ep); err != nil {
			return err
		}
	}
	return nil
}

// step handles pending commands at the step boundary, then emits the step.
func (f *fakeRunner) step(info runner.RunInfo, ep, s int) error {
	if err := f.commandsAt(info, ep, s-1); err != nil {
		return err
	}
	g := (ep-1)*info.StepsPerEpoch + s
	ev := runner.StepDone{Run: info.ID, Epoch: ep, Step: s, Steps: info.StepsPerEpoch,
		Loss: fakeLoss(g), StepTime: time.Duration(20+5*info.WorldSize) * time.Millisecond,
		ImagesPerSec: float64(100*info.WorldSize) / (float64(20+5*info.WorldSize) / 1000)}
	if info.Precision == "fp16" {
		ev.LossScale = 32
	}
	if err := f.emit(ev); err != nil {
		return err
	}
	if s%5 == 0 {
		if err := f.reports(info, s); err != nil {
			return err
		}
	}
	h := f.halt
	if f.replaying {
		h = f.reopenHalt
	}
	if h.run == info.ID && h.epoch == ep && h.step == s {
		f.mu.Lock()
		f.halted = true
		f.mu.Unlock()
		<-f.quit
		return stopErr{quit: true}
	}
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	return nil
}

func fakeLoss(g int) float64 { return 0.4 + 1.9*math.Exp(-float64(g)/25) + 0.05*math.Sin(float64(g)) }
func fakeAcc(ep int) float64 { return 0.88 - 0.5*math.Exp(-float64(ep)/1.5) }

// commandsAt applies every queued command; Pause blocks until Resume.
func (f *fakeRunner) commandsAt(info runner.RunInfo, ep, s int) error {
	for {
		select {
		case c := <-f.cmds[info.ID]:
			if err := f.apply(info, c, ep, s); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (f *fakeRunner) apply(info runner.RunInfo, c runner.Command, ep, s int) error {
	switch c := c.(type) {
	case runner.Pause:
		if err := f.emit(runner.Paused{Run: info.ID, Epoch: ep, Step: s}); err != nil {
			return err
		}
		return f.paused(info, ep, s)
	case runner.CheckpointNow:
		return f.save(info, ep)
	case runner.Stop:
		if c.Checkpoint {
			if err := f.save(info, ep); err != nil {
				return err
			}
		}
		return stopErr{checkpoint: c.Checkpoint}
	case runner.ResumeFrom:
		return restartErr{epoch: c.Epoch}
	case runner.Quit:
		if c.Checkpoint {
			if err := f.save(info, ep); err != nil {
				return err
			}
		}
		return quitErr{}
	}
	return nil
}

// paused waits for Resume, still serving the other commands.
func (f *fakeRunner) paused(info runner.RunInfo, ep, s int) error {
	for {
		select {
		case c := <-f.cmds[info.ID]:
			if _, ok := c.(runner.Resume); ok {
				return f.emit(runner.Resumed{Run: info.ID})
			}
			if err := f.apply(info, c, ep, s); err != nil {
				return err
			}
		case <-f.quit:
			return stopErr{quit: true}
		}
	}
}

// save writes the three checkpoint files of epoch e and reports them.
func (f *fakeRunner) save(info runner.RunInfo, e int) error {
	dir := ckptDir(info.ID)
	if err := os.MkdirAll(filepath.Join(f.root, dir), 0o755); err != nil {
		f.t.Errorf("checkpoint dir: %v", err)
		return err
	}
	var files []string
	for _, kind := range []string{"model", "optimizer", "lr_scheduler"} {
		p := filepath.Join(dir, fmt.Sprintf("%s_%d.pth", kind, e))
		if err := os.WriteFile(filepath.Join(f.root, p), []byte(kind+" "+info.ID), 0o644); err != nil {
			f.t.Errorf("checkpoint file: %v", err)
			return err
		}
		files = append(files, p)
	}
	return f.emit(runner.CheckpointSaved{Run: info.ID, Epoch: e, Dir: dir, Files: files})
}

func (f *fakeRunner) endEpoch(info runner.RunInfo, ep int) error {
	if err := f.emit(runner.EpochDone{Run: info.ID, Epoch: ep, Loss: fakeLoss(ep * info.StepsPerEpoch),
		TestAcc: fakeAcc(ep), Seconds: 0.5 * float64(info.StepsPerEpoch) * float64(20+5*info.WorldSize) / 1000 * 2, LR: 1e-3}); err != nil {
		return err
	}
	if f.every > 0 && ep%f.every == 0 {
		return f.save(info, ep)
	}
	return nil
}

// reports emits every rank's memory and, for gemini, chunk states.
func (f *fakeRunner) reports(info runner.RunInfo, s int) error {
	const mib = 1 << 20
	for r := range info.WorldSize {
		u := runner.MemoryUsage{Run: info.ID, Rank: r,
			Device:     [6]int64{43 * mib, 43 * mib, 86 * mib, int64(40+4*s) * mib, 8 * mib, 2 * mib},
			DevicePeak: 330 * mib, Capacity: 140 << 30}
		if info.Plugin == "gemini" {
			u.Device[2], u.Host[2], u.Host[0] = 20*mib, 66*mib, 12*mib
			u.HostPeak, u.Budget = 90*mib, 512*mib
		}
		if err := f.emit(u); err != nil {
			return err
		}
		if info.Plugin == "gemini" {
			if err := f.emit(runner.ChunksUpdate{Run: info.ID, Rank: r, Chunks: fakeChunks(r, s)}); err != nil {
				return err
			}
		}
	}
	if info.Plugin == "gemini" {
		return f.emit(runner.ChunkMoved{Run: info.ID, Rank: 0, Chunk: s % 12, ToDevice: s%10 == 0, Bytes: 4 << 20})
	}
	return nil
}

// fakeChunks gives 12 chunks whose dominant state and placement cycle with
// the step.
func fakeChunks(rank, s int) []runner.ChunkState {
	out := make([]runner.ChunkState, 12)
	for i := range out {
		var st [5]int
		st[(i+s+rank)%5] = 3
		st[(i+1)%5]++
		out[i] = runner.ChunkState{ID: i, OnDevice: (i+s)%3 != 0, States: st, Bytes: 4 << 20}
	}
	return out
}

func (f *fakeRunner) finish(info runner.RunInfo, status report.Status, err error) error {
	res := &report.Result{Run: info.ID, Plugin: info.Plugin, Precision: info.Precision,
		WorldSize: info.WorldSize, Status: status}
	if status == "done" {
		res.FinalTestAcc, res.BestTestAcc = fakeAcc(info.Epochs), fakeAcc(info.Epochs)
	}
	f.mu.Lock()
	f.ended[info.ID] = true // before the UI can see it: a ResumeFrom from now on re-opens it
	f.mu.Unlock()
	if e := f.emit(runner.RunFinished{Run: info.ID, Result: res}); e != nil {
		return e
	}
	return err
}
