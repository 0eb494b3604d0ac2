package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"resnetlab/ckpt"
	"resnetlab/report"
	"resnetlab/runner"
	"resnetlab/spec"
)

func (c *cli) cmdRun(ctx context.Context, args []string) int {
	fs := newFlags("run")
	var opts runner.RunOptions
	fs.BoolVar(&opts.Headless, "headless", false, "")
	fs.Var(refFlag{&opts.Resume}, "resume", "")
	fs.StringVar(&opts.Device, "device", "", "")
	fs.StringVar(&opts.ResultsDir, "results", "", "")
	fs.Var(listFlag{&opts.Runs}, "run", "")
	pos, done, code := c.parseArgs(fs, runUsage, args)
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.usageError("run", fmt.Sprintf("want one spec file, got %d arguments", len(pos)))
	}
	sp, err := spec.Load(pos[0])
	if err != nil {
		fmt.Fprintln(c.stderr, err)
		return exitFailed
	}
	sp, cells, rejected, err := opts.Apply(sp)
	for _, r := range rejected {
		fmt.Fprintln(c.stderr, r)
	}
	if fe := (*runner.FlagError)(nil); errors.As(err, &fe) {
		return c.usageError("run", fe.Error())
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", progName(), err)
		return exitFailed
	}
	world, err := joinWorld(ctx, pos[0], sp, cells, opts)
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", progName(), err)
		return exitFailed
	}
	if world != nil {
		defer world.Close()
		opts.World = world
		// Rank 0 may show the UI: the ranks agree on its commands at every
		// step (runner/worldcontrol.go) and it receives the others' memory.
		// The others have no front end: they print only their failure.
		opts.Headless = opts.Headless || world.Rank() != 0
	}
	if world == nil || world.Rank() == 0 { // the other ranks write nothing
		if err := c.checkPaths(sp, cells, opts); err != nil {
			fmt.Fprintln(c.stderr, err)
			if world != nil {
				world.Abort(err)
			}
			return exitFailed
		}
	}
	if !opts.Headless {
		opts.Headless = c.fallBackToHeadless()
	}
	inv := newInvocation(fs, pos[0], opts)
	if world != nil && world.Rank() != 0 { // rank 0 prints the run; the others only their failure
		q := *c
		q.stdout = io.Discard
		return q.execute(ctx, sp, cells, opts, inv)
	}
	return c.execute(ctx, sp, cells, opts, inv)
}

// fallBackToHeadless says why the UI cannot be shown, if it cannot.
func (c *cli) fallBackToHeadless() bool {
	switch {
	case c.tui == nil:
		fmt.Fprintln(c.stderr, "resnetlab: this build has no terminal UI; running headless")
	case !c.isTTY():
		fmt.Fprintln(c.stderr, "resnetlab: not a terminal; running headless")
	default:
		return false
	}
	return true
}

// execute runs the spec with its front end and returns the exit code.
// Once the runs have ended it prints, headless and after the UI alike, the
// comparison table (fitted to the terminal's width), where the figure
// went, after an interrupt how to go on (inv: how run was called), and
// last the outcome's line.
func (c *cli) execute(ctx context.Context, sp *spec.Spec, cells []spec.Cell, opts runner.RunOptions, inv invocation) int {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	events := make(chan runner.Event, 1024)
	cmds := make(chan runner.Command, 16)
	runErr := make(chan error, 1)
	// With the UI, RunSpec stays open after the last run so that r can
	// re-open a finished run; it returns when the UI has quit (cancel). A
	// world's run cannot be re-opened: its other processes have ended.
	opts.StayOpen = !opts.Headless && opts.World == nil
	go func() {
		runErr <- c.runSpec(ctx, sp, opts, events, cmds)
		close(events) // RunSpec never closes it: its sender is done now
	}()
	ids := make([]string, len(cells))
	for i, cell := range cells {
		ids[i] = cell.ID
	}
	prog := newProgress(ids)
	var failed []string // the runs whose failure the front end showed
	uiFailed := false
	var t *tee // the UI's copy of the events
	if opts.Headless {
		h := newHeadless(c.stdout, c.now)
		h.progress = prog
		h.consume(events)
		h.summary(c.width(c.stdout))
		failed = h.failed
		c.writePlots(sp, opts, h.results, h.kept)
	} else {
		t = newTee(events, prog)
		uiErr := c.tui(ctx, sp, cells, t.out, cmds)
		t.stopForwarding()
		cancel(errUIQuit) // the user quit (Ctrl-C; q has stopped the runs): stop whatever still runs
		if uiErr != nil && !errors.Is(uiErr, context.Canceled) {
			fmt.Fprintf(c.stderr, "resnetlab: terminal UI: %v\n", uiErr)
			uiFailed = true
		}
	}
	err := <-runErr
	if !opts.Headless { // once the runs have ended: the same table as headless
		failed = t.failedRuns()
		c.summaryAfterUI(t.results, t.kept)
		c.writePlots(sp, opts, t.results, t.kept)
	}
	switch {
	case errors.Is(err, context.Canceled) && (ctx.Err() != nil || opts.World != nil):
		if opts.World == nil || inv.launched() { // another launcher's world goes on with its own command line
			fmt.Fprint(c.stdout, prog.howToContinue(inv, c.width(c.stdout)))
		}
		// In a world, a rank stops with the rank that was interrupted: say so.
		msg := "interrupted"
		if ctx.Err() == nil {
			msg = clipLines(err.Error(), maxErrLines)
		}
		c.lastWord(progName() + ": " + msg)
		return exitInterrupted
	case err != nil:
		c.lastWord(progName() + ": " + failureLine(err, opts, failed, len(cells)))
		return exitFailed
	case len(failed) > 0 || uiFailed:
		return exitFailed
	}
	return exitOK
}

// lastWord prints run's closing line on stderr, wrapped to the terminal,
// never cut.
func (c *cli) lastWord(line string) {
	fmt.Fprintln(c.stderr, wrapText(line, c.width(c.stderr), "  "))
}

// summaryAfterUI prints, once the UI has quit, the table headless prints
// (fitted to the terminal), then every error of a run in it whole,
// wrapped to the terminal's width: the UI that showed them has gone, and
// a table's width would cut the end of a message, often what to do.
func (c *cli) summaryAfterUI(results []*report.Result, kept map[string]string) {
	if len(results) == 0 {
		return
	}
	rs := make([]*report.Result, len(results))
	for i, r := range results {
		cp := *r
		cp.Error = ""
		rs[i] = &cp
	}
	w := c.width(c.stdout)
	fmt.Fprintf(c.stdout, "\n%s", report.CompareTableWidth(rs, w))
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintln(c.stdout, wrapText(r.Run+": "+clipLines(r.Error, maxErrLines), w, "  "))
		}
		if why := kept[r.Run]; why != "" { // the UI's log said it; the UI is gone
			fmt.Fprintln(c.stdout, wrapText(r.Run+": "+why, w, "  "))
		}
	}
}

// failureLine is run's last word on a failed spec. A run's failure the
// front end has shown (headless's FAILED line, the UI and its table) is
// not printed again, once per layer, burying it: the line names the
// failed runs. The whole error is printed where nothing showed it: a
// spec that could not start (a PreflightError names no run of its own),
// or a rank of a world other than 0, whose output is discarded.
func failureLine(err error, opts runner.RunOptions, shown []string, runs int) string {
	var pe *runner.PreflightError
	if len(shown) == 0 || errors.As(err, &pe) || (opts.World != nil && opts.World.Rank() != 0) {
		return clipLines(err.Error(), maxErrLines)
	}
	return fmt.Sprintf("%d of %d run%s failed: %s", len(shown), runs, plural(runs), strings.Join(shown, ", "))
}

// errUIQuit is why the runs still training stop once the UI has quit
// (Ctrl-C): their results say "interrupted: ctrl+c in the terminal UI"
// rather than "context canceled". It matches context.Canceled, so they end
// interrupted (checkpointing first) and the exit status is 130.
var errUIQuit error = uiQuitError{}

type uiQuitError struct{}

func (uiQuitError) Error() string        { return "ctrl+c in the terminal UI" }
func (uiQuitError) Is(target error) bool { return target == context.Canceled }

// writePlots draws the spec's runs into results/<spec>.png and .svg (rank
// 0 only, like the result files) and says where: this session's finished
// runs and, for the other runs of the grid (a --run subset, a resume), the
// result files of earlier sessions of the same recipe, so that the figure
// keeps showing the whole grid. A figure that cannot be written is a
// warning: the runs' results stand; before any epoch has ended there is
// nothing to draw and nothing is said. A run of this session with no
// evaluated epoch (one that failed before training: its result file, if
// any, is left as it was) draws nothing: its cell keeps its earlier result
// file's curve, and a session where no run drew leaves the figure as it is.
// So does a run whose result file was kept (kept: RunFinished.Kept): the
// figure shows the record in results/, not this session's partial run.
func (c *cli) writePlots(sp *spec.Spec, opts runner.RunOptions, results []*report.Result, kept map[string]string) {
	if opts.World != nil && opts.World.Rank() != 0 {
		return
	}
	var drawn []*report.Result
	for _, r := range results {
		if _, k := kept[r.Run]; len(r.EpochResults) > 0 && !k {
			drawn = append(drawn, r)
		}
	}
	if len(drawn) == 0 {
		return
	}
	all, earlier := withEarlierResults(sp, drawn)
	paths, err := report.WritePlots(sp.ResultsDir, sp.Name, all)
	if errors.Is(err, report.ErrNothingToPlot) { // no epoch ended: nothing to compare yet
		return
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab run: no comparison figure: %v\n", err)
		return
	}
	note := ""
	if earlier > 0 {
		note = fmt.Sprintf(" (%d run%s of this session, %d from earlier result files)",
			len(all)-earlier, plural(len(all)-earlier), earlier)
	}
	fmt.Fprintf(c.stdout, "comparison figure: %s%s\n", strings.Join(paths, ", "), note)
}

// withEarlierResults returns the grid's results in grid order: this
// session's, and for each other cell its result file in the results
// directory where one of the same recipe (data set, width, batch, epochs)
// can be read; earlier says how many came from files.
func withEarlierResults(sp *spec.Spec, session []*report.Result) (all []*report.Result, earlier int) {
	mine := make(map[string]*report.Result, len(session))
	for _, r := range session {
		mine[r.Run] = r
	}
	cells, _, err := sp.Cells()
	if err != nil {
		return session, 0
	}
	for _, cell := range cells {
		if r, ok := mine[cell.ID]; ok {
			all = append(all, r)
			delete(mine, cell.ID)
			continue
		}
		rs, err := report.ReadResults([]string{filepath.Join(sp.ResultsDir, spec.ResultFile(sp.Name, cell.ID))})
		if err != nil || len(rs) != 1 || !sameRecipe(sp, rs[0]) {
			continue
		}
		all = append(all, rs[0])
		earlier++
	}
	for _, r := range session { // not a cell of the grid as parsed now: keep it
		if _, ok := mine[r.Run]; ok {
			all = append(all, r)
		}
	}
	return all, earlier
}

// sameRecipe reports whether a result file was trained with the spec's
// recipe, so that its curve belongs beside this session's.
func sameRecipe(sp *spec.Spec, r *report.Result) bool {
	return r.Spec == sp.Name && r.Dataset == sp.Dataset && r.Width == sp.Width &&
		r.BatchSize == sp.BatchSize && r.Epochs == sp.Epochs
}

// tee forwards the runner's events to the UI and keeps the runs' results
// for the summary printed after the UI has quit. It reads the runner's
// channel at once, whatever the UI is doing: events the UI has not taken
// yet wait in the tee's queue, so a training goroutine never waits for the
// UI to draw (the UI takes everything queued in one read). Once the UI has
// quit it stops forwarding (nobody reads) but keeps reading, so the runner
// never blocks on a full channel while its runs wind down.
type tee struct {
	out      chan runner.Event
	uiGone   chan struct{}
	done     chan struct{}
	results  []*report.Result  // owned by the tee's goroutine until done closes
	kept     map[string]string // runs whose result file was left as it was (RunFinished.Kept): why; owned likewise
	failed   []string          // the runs that failed, as the UI showed them; owned likewise
	progress *progress         // how far each run got; owned likewise
	// queued is the longest the queue got (tests read it after done).
	queued int
}

func newTee(in <-chan runner.Event, p *progress) *tee {
	t := &tee{out: make(chan runner.Event), uiGone: make(chan struct{}), done: make(chan struct{}), progress: p,
		kept: map[string]string{}}
	go t.forward(in)
	return t
}

func (t *tee) forward(in <-chan runner.Event) {
	defer close(t.done)
	defer close(t.out)
	var queue []runner.Event
	gone := t.uiGone
	for in != nil || (len(queue) > 0 && gone != nil) {
		var out chan runner.Event // nil (no send) while the queue is empty
		var next runner.Event
		if len(queue) > 0 && gone != nil {
			out, next = t.out, queue[0]
		}
		select {
		case ev, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			t.progress.note(ev)
			if f, ok := ev.(runner.RunFinished); ok {
				t.finished(f)
			}
			if gone != nil {
				queue = append(queue, ev)
				t.queued = max(t.queued, len(queue))
			}
		case out <- next:
			queue[0] = nil
			queue = queue[1:]
		case <-gone:
			gone, queue = nil, nil
		}
	}
}

// finished keeps a run's result and whether it failed (a re-opened run
// that then succeeds is no failure any more), and whether its result file
// was left as it was.
func (t *tee) finished(f runner.RunFinished) {
	if f.Result != nil {
		t.keep(f.Result)
	}
	delete(t.kept, f.Run) // a re-opened run's second end decides
	if f.Kept != "" {
		t.kept[f.Run] = f.Kept
	}
	t.failed = slices.DeleteFunc(t.failed, func(id string) bool { return id == f.Run })
	var pe *runner.PreflightError
	if f.Err != nil && !errors.As(f.Err, &pe) {
		t.failed = append(t.failed, f.Run)
	}
}

// failedRuns waits for the event stream to end and returns the runs that
// failed.
func (t *tee) failedRuns() []string {
	<-t.done
	return t.failed
}

// keep records r, replacing an earlier result of the same run (a run
// re-opened from the UI finishes twice).
func (t *tee) keep(r *report.Result) {
	for i, old := range t.results {
		if old.Run == r.Run {
			t.results[i] = r
			return
		}
	}
	t.results = append(t.results, r)
}

func (t *tee) stopForwarding() { close(t.uiGone) }

// refFlag reads --resume's E or E@S.
type refFlag struct{ ref *ckpt.Ref }

func (f refFlag) String() string {
	if f.ref == nil || f.ref.IsZero() {
		return ""
	}
	return f.ref.String()
}

func (f refFlag) Set(s string) (err error) {
	*f.ref, err = ckpt.ParseRef(s)
	return err
}

// listFlag reads a flag that may be given several times, each time one
// value or several separated by commas (--run a,b --run c).
type listFlag struct{ list *[]string }

func (f listFlag) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Join(*f.list, ",")
}

func (f listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v == "" {
			return fmt.Errorf("empty name in %q", s)
		}
		*f.list = append(*f.list, v)
	}
	return nil
}
