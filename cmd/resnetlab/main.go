// Command resnetlab trains torchvision's ResNet-18 on CIFAR-10 the way
// ColossalAI's ResNet example does (plugins torch_ddp, torch_ddp_fp16,
// low_level_zero, gemini), on CPU or NVIDIA GPUs, from TOML experiment
// specs; see `resnetlab help`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/x/term"

	"resnetlab/runner"
	"resnetlab/spec"
)

func main() {
	// Ctrl-C (or SIGTERM) cancels the context: runs stop at a step boundary.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newCLI(os.Stdout, os.Stderr).main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// cli holds the program's outputs and the functions it calls, so tests can
// run commands in-process with fakes.
type cli struct {
	stdout, stderr io.Writer
	isTTY          func() bool
	now            func() time.Time
	runSpec        func(context.Context, *spec.Spec, runner.RunOptions, chan<- runner.Event, <-chan runner.Command) error
	eval           func(context.Context, runner.EvalOptions) (float64, []float64, error)
	fetch          fetchFunc
	tui            tuiFunc // nil when the TUI is not built in
	// width is the columns of the terminal w writes to, 0 when it is none.
	width func(w io.Writer) int
	// checkPaths vets checkpoint and results directories before a run.
	checkPaths func(*spec.Spec, []spec.Cell, runner.RunOptions) error
}

func newCLI(stdout, stderr io.Writer) *cli {
	return &cli{
		stdout: stdout, stderr: stderr,
		isTTY:   func() bool { return term.IsTerminal(os.Stdout.Fd()) && term.IsTerminal(os.Stdin.Fd()) },
		now:     time.Now,
		runSpec: runner.RunSpec,
		eval:    runner.Eval,
		fetch:   fetchData,
		tui:     startTUI,
		width:   terminalWidth,

		checkPaths: checkPaths,
	}
}

// main runs one command line (without the program name) and returns the
// exit code.
func (c *cli) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, mainUsage)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		fmt.Fprint(c.stdout, mainUsage)
		return exitOK
	case "help":
		return c.help(rest)
	case "--version", "-version":
		return c.cmdVersion(ctx, nil)
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(c.stderr, "resnetlab: unknown command %q (want run, launch, eval, data, compare, report, bench, export, import, help or version)\n"+
			"Run 'resnetlab help' for usage.\n", name)
		return exitUsage
	}
	return cmd.run(c, ctx, rest)
}

func (c *cli) help(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stdout, mainUsage)
		return exitOK
	}
	switch args[0] {
	case "help", "-h", "-help", "--help": // help is no entry of commands: main runs it itself
		fmt.Fprint(c.stdout, helpUsage)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(c.stderr, "resnetlab help: unknown command %q (want run, launch, eval, data, compare, report, bench, export, import, help or version)\n", args[0])
		return exitUsage
	}
	fmt.Fprint(c.stdout, cmd.usage)
	return exitOK
}

// cmdVersion prints which build this is.
func (c *cli) cmdVersion(_ context.Context, args []string) int {
	fs := newFlags("version")
	pos, done, code := c.parseArgs(fs, versionUsage, args)
	if done {
		return code
	}
	if len(pos) > 0 {
		return c.usageError("version", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	fmt.Fprintln(c.stdout, versionLine(debug.ReadBuildInfo()))
	return exitOK
}

// versionLine says which build this is: the module version and, where the
// build recorded them, the commit, its time and whether the tree had
// uncommitted changes (go build in a git checkout records them; go run
// does too), and the Go version.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "resnetlab (no build information)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	v := bi.Main.Version
	line := "resnetlab " + v
	if rev := settings["vcs.revision"]; rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) { // a pseudo-version names it already
		line += " commit " + rev[:min(12, len(rev))]
		if t := settings["vcs.time"]; t != "" {
			line += " (" + t + ")"
		}
	}
	if settings["vcs.modified"] == "true" && !strings.HasSuffix(v, "+dirty") {
		line += " with uncommitted changes"
	}
	line += ", " + bi.GoVersion
	if v == "(devel)" && settings["vcs.revision"] == "" {
		line += " (no commit recorded: built outside a git checkout or with -buildvcs=false)"
	}
	return line
}

// command is one subcommand.
type command struct {
	usage string
	run   func(c *cli, ctx context.Context, args []string) int
}

var commands map[string]command

func init() { // in init: the run functions refer to commands for their usage
	commands = map[string]command{
		"run":     {runUsage, (*cli).cmdRun},
		"version": {versionUsage, (*cli).cmdVersion},
		"launch":  {launchUsage, (*cli).cmdLaunch},
		"eval":    {evalUsage, (*cli).cmdEval},
		"data":    {dataUsage, (*cli).cmdData},
		"compare": {compareUsage, (*cli).cmdCompare},
		"bench":   {benchUsage, (*cli).cmdBench},
		"export":  {exportUsage, (*cli).cmdExport},
		"import":  {importUsage, (*cli).cmdImport},
		"report":  {reportUsage, (*cli).cmdReport},
	}
}

// terminalWidth is the width of the terminal w is, 0 when w is no
// terminal (a pipe, a file, a test's buffer): nothing is then wrapped or
// narrowed.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(f.Fd()) {
		return 0
	}
	width, _, err := term.GetSize(f.Fd())
	if err != nil {
		return 0
	}
	return width
}
