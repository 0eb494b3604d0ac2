package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"resnetlab/ckpt"
	"resnetlab/device"
	"resnetlab/spec"
	"runtime"
	"time"

	"resnetlab/data"
)

// gridRun schedules the runs of one RunSpec call. One goroutine (loop)
// owns all of its state: it starts runs as slots free up, routes every
// command to its run's inbox, re-opens finished runs on ResumeFrom and
// collects the outcomes. Each run trains in its own goroutine and reads
// only its own inbox, so a command addressed to one run never reaches
// another, however many train at once.
type gridRun struct {
	spec        *spec.Spec
	opts        RunOptions
	cells       []spec.Cell
	events      chan<- Event
	plan        gridPlan
	train, test *data.Dataset

	infos    []RunInfo
	index    map[string]int // run id -> cell
	inbox    []chan Command // per cell; buffered, read by the run's job
	state    []cellState
	resume   []ckpt.Ref // per cell: the checkpoint its next job resumes from
	reopened []bool     // per cell: its next job was asked for by ResumeFrom
	errs     []error    // per cell: the outcome of its last job
	queue    []int      // cells waiting for a slot, in start order
	running  int
	done     chan cellDone
	quit     bool // Quit came: nothing more starts or re-opens
}

type cellState int

const (
	cellQueued cellState = iota
	cellTraining
	cellEnded
)

type cellDone struct {
	cell int
	err  error
}

// inboxSize is how many commands may wait for a run's next step boundary.
const inboxSize = 64

func (g *gridRun) init() {
	n := len(g.cells)
	g.infos, g.inbox = make([]RunInfo, n), make([]chan Command, n)
	g.state, g.errs, g.resume = make([]cellState, n), make([]error, n), make([]ckpt.Ref, n)
	g.reopened = make([]bool, n)
	g.index = make(map[string]int, n)
	g.done = make(chan cellDone, n) // one job per cell at a time: sends never block
	for i, c := range g.cells {
		g.index[c.ID] = i
		g.inbox[i] = make(chan Command, inboxSize)
		g.resume[i] = g.opts.StartFrom(g.spec)
		g.infos[i] = runInfo(g.spec, c, g.train)
		g.queue = append(g.queue, i)
		g.emit(RunQueued{Info: g.infos[i]})
	}
}

func (g *gridRun) emit(e Event) {
	if g.events != nil {
		g.events <- e
	}
}

func (g *gridRun) logf(run string, level Level, format string, args ...any) {
	g.emit(Log{Run: run, Time: time.Now(), Level: level, Text: fmt.Sprintf(format, args...)})
}

// announceMoved says where each run keeps its checkpoints when that is not
// the spec's directory (placeCheckpoints), before any run starts.
func (g *gridRun) announceMoved(moved map[string]string) {
	for _, c := range g.cells {
		base, ok := moved[c.ID]
		switch {
		case !ok:
		case g.opts.StartFrom(g.spec).IsZero():
			g.logf(c.ID, LevelWarn, "checkpoint directory %s holds an earlier run's checkpoints: this fresh run keeps its "+
				"checkpoints in %s and touches none of them (resume = E continues the newest run)", base, c.CheckpointDir)
		default:
			g.logf(c.ID, LevelInfo, "resuming from %s, the newest of %s and its numbered runs holding that checkpoint",
				c.CheckpointDir, base)
		}
	}
}

// loop runs the grid to its end and returns the runs' errors, in grid order.
func (g *gridRun) loop(ctx context.Context, cmds <-chan Command) error {
	ctxDone := ctx.Done()
	for {
		if ctx.Err() == nil {
			g.startQueued(ctx)
		}
		if g.running == 0 && g.over(ctx, cmds) {
			break
		}
		select {
		case d := <-g.done:
			g.running--
			g.state[d.cell], g.errs[d.cell] = cellEnded, d.err
			g.rerouteLeftovers(ctx, d.cell)
		case c, ok := <-cmds:
			if !ok {
				cmds = nil // a nil channel never receives: the select waits for the runs
				continue
			}
			g.route(ctx, c)
		case <-ctxDone:
			ctxDone = nil // the runs see it too and end interrupted; wait for them
		}
	}
	var errs []error
	for i, c := range g.cells {
		if g.state[i] == cellQueued {
			g.errs[i] = g.notStarted(ctx)
		}
		if g.errs[i] != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.ID, g.errs[i]))
		}
	}
	return errors.Join(errs...)
}

// over reports, when no run trains, whether the grid is over: nothing is
// left to start (or Ctrl-C came) and no front end may re-open a run.
func (g *gridRun) over(ctx context.Context, cmds <-chan Command) bool {
	if ctx.Err() != nil || g.quit {
		return true
	}
	return len(g.queue) == 0 && (!g.opts.StayOpen || cmds == nil)
}

// startQueued starts queued runs while the plan has free slots.
func (g *gridRun) startQueued(ctx context.Context) {
	var batch []int
	for g.running < g.plan.slots && len(g.queue) > 0 {
		i := g.queue[0]
		g.queue = g.queue[1:]
		g.state[i] = cellTraining
		g.running++
		batch = append(batch, i)
	}
	for _, i := range batch {
		job := &job{spec: g.spec, cell: g.cells[i], info: g.infos[i], events: g.events, cmds: g.inbox[i],
			train: g.train, test: g.test, startFrom: g.resume[i], place: g.placement(i), reopened: g.reopened[i], world: g.opts.World}
		go func(i int) {
			g.done <- cellDone{i, runCell(ctx, job)}
		}(i)
	}
}

// placement is where run i trains. CPU runs split the cores with the runs
// training now: all of them when the grid starts, fewer for a run
// re-opened later.
func (g *gridRun) placement(i int) placement {
	pl := g.plan.places[i]
	if pl.cpuRanks > 0 {
		pl.cpuRanks = 0
		for k, st := range g.state {
			if st == cellTraining {
				pl.cpuRanks += g.cells[k].WorldSize
			}
		}
	}
	return pl
}

// route delivers a command: a To to its run, anything else to every
// training run (or to the next run to start when none trains).
func (g *gridRun) route(ctx context.Context, c Command) {
	if q, ok := c.(Quit); ok {
		g.quitGrid(q)
		return
	}
	t, ok := c.(To)
	if !ok {
		n := 0
		for i, st := range g.state {
			if st == cellTraining {
				g.deliver(i, c)
				n++
			}
		}
		if n == 0 && len(g.queue) > 0 {
			g.deliver(g.queue[0], c)
		}
		return
	}
	i, ok := g.index[t.Run]
	switch {
	case !ok:
		g.logf("", LevelWarn, "command %T for run %q ignored: the spec has no such run", t.Cmd, t.Run)
	case g.state[i] != cellEnded:
		g.deliver(i, t.Cmd)
	default:
		if rf, ok := t.Cmd.(ResumeFrom); ok {
			g.reopen(ctx, i, rf.Ref())
			return
		}
		g.logf(t.Run, LevelWarn, "%s has finished: command %T ignored", t.Run, t.Cmd)
	}
}

// quitGrid ends the grid: the queued runs are dropped before they start
// (their files stay as they were) and the training runs get q.
func (g *gridRun) quitGrid(q Quit) {
	g.quit = true
	if n := len(g.queue); n > 0 {
		g.logf("", LevelInfo, "quit: %d queued run(s) will not start", n)
	}
	g.queue = nil
	for i, st := range g.state {
		if st == cellTraining {
			g.deliver(i, q)
		}
	}
}

// notStarted is the outcome of a run the grid ended before it started.
func (g *gridRun) notStarted(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil {
		return fmt.Errorf("not started: %w", cause)
	}
	return fmt.Errorf("not started: %w", errQuit)
}

// rerouteLeftovers handles the commands that reached run i's inbox after
// its job's last look at it. A front end reacts to RunFinished before the
// job's goroutine reports here, so a ResumeFrom sent on that event lands in
// the inbox of a job that has ended; routed again now that the run is
// ended, it re-opens the run instead of being lost.
func (g *gridRun) rerouteLeftovers(ctx context.Context, i int) {
	var left []Command
	for len(g.inbox[i]) > 0 {
		left = append(left, <-g.inbox[i])
	}
	for _, c := range left {
		if _, ok := c.(Quit); ok { // for the job that has ended
			continue
		}
		g.route(ctx, To{Run: g.cells[i].ID, Cmd: c})
	}
}

// deliver queues c for run i's next step boundary without blocking the
// scheduler: a run that does not read its inbox must not stall the others.
func (g *gridRun) deliver(i int, c Command) {
	select {
	case g.inbox[i] <- c:
	default:
		g.logf(g.cells[i].ID, LevelWarn, "%d commands already wait for %s: command %T dropped", inboxSize, g.cells[i].ID, c)
	}
}

// reopen queues a new job for finished run i that resumes from
// checkpoint ref and trains to the spec's end, replacing the run's result.
// A checkpoint that is not there is refused here, so that a wrong choice
// cannot overwrite the run's result with a failure.
func (g *gridRun) reopen(ctx context.Context, i int, ref ckpt.Ref) {
	id, dir := g.cells[i].ID, g.cells[i].CheckpointDir
	if ctx.Err() != nil || g.quit {
		g.logf(id, LevelWarn, "%s not re-opened: the grid is being interrupted", id)
		return
	}
	if ref.Epoch < 1 || ref.Epoch > g.spec.Epochs || ref.Step < 0 {
		g.logf(id, LevelError, "%s not re-opened: checkpoint %s is outside epochs 1..%d", id, ref, g.spec.Epochs)
		return
	}
	if path, _, _ := ref.Paths(dir); noCheckpoints(dir) || !fileExists(path) {
		g.logf(id, LevelError, "%s not re-opened: no checkpoint of %s in %q", id, ref.Describe(), dir)
		return
	}
	g.state[i], g.resume[i], g.reopened[i] = cellQueued, ref, true
	g.queue = append([]int{i}, g.queue...) // asked for now: next to start
	g.emit(RunQueued{Info: g.infos[i], From: ref})
	g.logf(id, LevelInfo, "re-opening %s from the checkpoint of %s: it trains to epoch %d and its result is replaced",
		id, ref.Describe(), g.spec.Epochs)
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// The rule for concurrent = true ("the grid's runs train at the same time
// if the devices allow"):
//
//   - CPU backend: always. The runs split the cores: every CPU rank of every
//     run gets GOMAXPROCS / (ranks of all runs) worker goroutines, at least
//     one. Results do not depend on the worker count, so a run gives the
//     same model concurrently as alone.
//   - CUDA: when share_devices = true, or when the runs' ranks together fit
//     the GPUs one rank per GPU. Run k's ranks start at GPU (ranks of runs
//     0..k-1) mod GPUs, so concurrent runs fill different GPUs before any
//     two share one. Otherwise (share_devices = false and more ranks than
//     GPUs) the runs train one after another, and a warning says why.
//
// Either way a run that fails ends alone: the others go on.

// placement is one run's share of the machine while runs train at once.
type placement struct {
	firstDevice int // CUDA: rank r trains on GPU (firstDevice + r) mod devices
	devices     int // CUDA: GPUs found; 0 leaves the run's plan as it is
	cpuRanks    int // CPU: ranks of every concurrent run, which split the cores
}

// share is the placement as the device plan takes it.
func (pl placement) share() device.Share {
	return device.Share{FirstDevice: pl.firstDevice, Devices: pl.devices, CPURanks: pl.cpuRanks}
}

// gridPlan says how many of a spec's runs train at once and where.
type gridPlan struct {
	slots  int         // runs training at the same time; 1 = one after another
	places []placement // per cell
	notice string      // a line for the log: how the runs share, or why they cannot
	level  Level       // the notice's level: LevelInfo or LevelWarn
}

// planGrid applies the rule above to the spec's runs on this machine.
func planGrid(s *spec.Spec, cells []spec.Cell) gridPlan {
	if !s.Concurrent || len(cells) < 2 {
		return planGridOn(s, cells, "", 0)
	}
	kind, n := "cpu", 0
	if s.Device != "cpu" {
		if gpus, err := device.GPUs(); err == nil {
			kind, n = "cuda", gpus
		} else if s.Device == "cuda" {
			kind = "" // every run fails with planBackends' error; nothing to share
		}
	}
	return planGridOn(s, cells, kind, n)
}

// planGridOn is planGrid for a known backend kind ("cpu", "cuda" or "" for
// none) with n GPUs.
func planGridOn(s *spec.Spec, cells []spec.Cell, kind string, n int) gridPlan {
	p := gridPlan{slots: 1, places: make([]placement, len(cells)), level: LevelInfo}
	if !s.Concurrent || len(cells) < 2 || kind == "" {
		return p
	}
	total := 0
	for _, c := range cells {
		total += c.WorldSize
	}
	switch kind {
	case "cpu":
		for i := range p.places {
			p.places[i].cpuRanks = total
		}
		p.slots = len(cells)
		workers := fmt.Sprintf("%d workers", max(1, runtime.GOMAXPROCS(0)/total))
		if workers == "1 workers" {
			workers = "1 worker"
		}
		p.notice = fmt.Sprintf("concurrent = true: %d runs train at once on the CPU; their %d ranks share %d cores (%s each)",
			len(cells), total, runtime.GOMAXPROCS(0), workers)
	case "cuda":
		if total > n && !s.ShareDevices {
			p.level = LevelWarn
			p.notice = fmt.Sprintf("concurrent = true, but the %d runs need %d GPUs together, %d found, and share_devices = false: "+
				"they train one after another (set share_devices = true to let concurrent runs share GPUs)", len(cells), total, n)
			return p
		}
		first := 0
		for i, c := range cells {
			p.places[i] = placement{firstDevice: first % n, devices: n}
			first += c.WorldSize
		}
		p.slots = len(cells)
		p.notice = fmt.Sprintf("concurrent = true: %d runs train at once; their %d ranks on %d GPU(s)", len(cells), total, n)
		if total > n {
			p.notice += " (GPUs are shared: share_devices = true)"
		}
	}
	return p
}
