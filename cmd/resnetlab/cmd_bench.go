package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"resnetlab/kernels"
	"resnetlab/runner"
	"resnetlab/spec"
)

const benchUsage = `Usage: resnetlab bench [--device NAME] [--width W] [--batch N] [--steps S] [--warmup K] [--precision LIST] [--plugin NAME] [--budget LIST] [--profile S] [--graphs]

Times full training steps of ResNet-18 (forward, loss, backward, gradient
handling, Adam) on one rank with a fixed batch already on the device, and
prints the mean step time and images/s per precision. Runs report the
throughput with the input pipeline included.

Flags:
  --device NAME      auto (GPUs when present, else CPU), cpu or cuda (default auto)
  --width W          channels of the first stage (default 64: ResNet-18)
  --batch N          images per step (default 100)
  --steps S          timed steps (default 50)
  --warmup K         untimed steps first (default 5)
  --precision LIST   comma-separated precisions: fp32, fp16, bf16 (default
                     fp32,fp16, less those the plugin cannot train in)
  --plugin NAME      torch_ddp, torch_ddp_fp16 (torch_ddp in fp16),
                     low_level_zero or gemini (default torch_ddp)
  --budget LIST      gemini only: comma-separated device budgets, each timed
                     after the unlimited run (auto placement): a size
                     ("139MB", "64MiB") or a fraction of the unlimited
                     run's peak ("1/2", "1/4")
  --profile S        after the timed steps, time every backend op over S more
                     steps (CUDA events around each op) and print the device
                     time per op kind and per layer shape, with the launches,
                     copies and host syncs per step (cuda only)
  --graphs           time every precision twice: eager, then with forward, loss
                     and backward replayed as a CUDA graph (cuda_graphs), and
                     print the sha256 of the training state after the timed
                     steps for both: they must be equal (needs --warmup >= 3)

Examples:
  resnetlab bench --device cuda --steps 200
  resnetlab bench --device cpu --width 16 --steps 10
  resnetlab bench --device cuda --steps 200 --warmup 20 --graphs
  resnetlab bench --device cuda --plugin gemini --precision fp16 --budget 1/2,1/4
`

func (c *cli) cmdBench(ctx context.Context, args []string) int {
	fs := newFlags("bench")
	o := runner.BenchOptions{}
	var precisions, budgets string
	fs.StringVar(&o.Device, "device", "auto", "")
	fs.IntVar(&o.Width, "width", 64, "")
	fs.IntVar(&o.Batch, "batch", 100, "")
	fs.IntVar(&o.Steps, "steps", 50, "")
	fs.IntVar(&o.Warmup, "warmup", 5, "")
	fs.StringVar(&precisions, "precision", benchDefaultPrecisions, "")
	fs.StringVar(&o.Plugin, "plugin", spec.PluginTorchDDP, "")
	fs.StringVar(&budgets, "budget", "", "")
	fs.IntVar(&o.Profile, "profile", 0, "")
	fs.BoolVar(&o.Graphs, "graphs", false, "")
	pos, done, code := c.parseArgs(fs, benchUsage, args)
	if done {
		return code
	}
	if len(pos) > 0 {
		return c.usageError("bench", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	if msg := checkBenchCounts(o); msg != "" {
		return c.usageError("bench", msg)
	}
	if err := spec.CheckDevice(o.Device); err != nil { // as run refuses it: never a silent fall back to the CPU
		return c.usageError("bench", fmt.Sprintf("--device %q: %v", o.Device, err))
	}
	var err error
	if o.Plugin, o.Precisions, err = benchPrecisions(o.Plugin, precisions, flagGiven(fs, "precision")); err != nil {
		return c.usageError("bench", err.Error())
	}
	if o.Budgets, err = parseBudgets(budgets); err != nil {
		return c.usageError("bench", err.Error())
	}
	res, err := runner.Bench(ctx, o)
	if fe := (*runner.FlagError)(nil); errors.As(err, &fe) {
		return c.usageError("bench", fe.Error())
	}
	for _, r := range res {
		fmt.Fprintf(c.stdout, "%-14s %-5s %-28s %8.2f ms/step %9.0f images/s  peak %s%s%s\n",
			r.Plugin, r.Precision, r.Device, r.StepMS, r.ImagesPerSec, spec.FormatSize(r.PeakBytes), budgetCol(r), graphCols(r))
	}
	writeGraphVerdicts(c.stdout, res)
	for _, r := range res {
		writeBenchProfile(c.stdout, r)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab bench: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// checkBenchCounts says which count flag is out of range, "" when none.
func checkBenchCounts(o runner.BenchOptions) string {
	for _, f := range []struct {
		name     string
		val, min int
	}{{"width", o.Width, 1}, {"batch", o.Batch, 1}, {"steps", o.Steps, 1}, {"warmup", o.Warmup, 0}, {"profile", o.Profile, 0}} {
		if f.val < f.min {
			return fmt.Sprintf("--%s %d: want an integer >= %d", f.name, f.val, f.min)
		}
	}
	return ""
}

// benchDefaultPrecisions is --precision's default, less the precisions the
// plugin cannot train in (gemini and low_level_zero: no fp32).
const benchDefaultPrecisions = "fp32,fp16"

// benchPrecisions checks --plugin and --precision with the grid's rules
// and returns the plugin the engine knows (torch_ddp_fp16 is torch_ddp in
// fp16, as in a spec) and the precisions to time. A precision the user
// named that the plugin cannot train in is an error; the default list
// just drops it, so that "bench --plugin gemini" works as typed.
func benchPrecisions(plugin, list string, given bool) (string, []string, error) {
	if err := spec.CheckPlugin(plugin); err != nil {
		return "", nil, fmt.Errorf("--plugin %q: %v", plugin, err)
	}
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if err := spec.CheckPrecision(p); err != nil {
			return "", nil, fmt.Errorf("--precision %q: %v", p, err)
		}
		reason := spec.PluginPrecisionReason(plugin, p)
		switch {
		case reason == "":
			out = append(out, p)
		case given:
			return "", nil, fmt.Errorf("--plugin %s --precision %s: %s", plugin, p, reason)
		}
	}
	if plugin == spec.PluginTorchDDPFP16 {
		plugin = spec.PluginTorchDDP
	}
	return plugin, out, nil
}

// parseBudgets parses --budget: sizes or fractions "1/N" (N >= 1).
func parseBudgets(list string) ([]runner.BenchBudget, error) {
	if list == "" {
		return nil, nil
	}
	var out []runner.BenchBudget
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if strings.Contains(f, "/") { // a fraction, maybe not 1/N: the size parser would call "/1" a unit
			d, _ := strings.CutPrefix(f, "1/")
			n, err := strconv.Atoi(d)
			if !strings.HasPrefix(f, "1/") || err != nil || n < 1 {
				return nil, fmt.Errorf("--budget %q: want a size or a fraction 1/N with N >= 1", f)
			}
			out = append(out, runner.BenchBudget{Of: n})
			continue
		}
		b, err := spec.ParseSize(f)
		switch {
		case err != nil && strings.Contains(err.Error(), "(want"): // already says what it wants
			return nil, fmt.Errorf("--budget %q: %v", f, err)
		case err != nil:
			return nil, fmt.Errorf("--budget %q: %v (want a size, e.g. 139MB, or a fraction 1/N)", f, err)
		case b <= 0:
			return nil, fmt.Errorf("--budget %q: a budget of 0 bytes (want a size, e.g. 139MB, or a fraction 1/N)", f)
		}
		out = append(out, runner.BenchBudget{Bytes: b})
	}
	return out, nil
}

// budgetCol names a Gemini budgeted result's device budget.
func budgetCol(r runner.BenchResult) string {
	if r.Budget == 0 {
		return ""
	}
	return "  budget " + spec.FormatSize(r.Budget)
}

// graphCols is the eager/graph column and state digest of a --graphs run.
func graphCols(r runner.BenchResult) string {
	if r.StateSHA == "" {
		return ""
	}
	mode := "eager"
	if r.Graphs {
		mode = "graph"
	}
	return fmt.Sprintf("  %s state sha256 %s", mode, r.StateSHA[:16])
}

// writeGraphVerdicts compares each precision's eager and graph results.
func writeGraphVerdicts(w io.Writer, res []runner.BenchResult) {
	eager := map[string]runner.BenchResult{}
	for _, r := range res {
		if r.StateSHA == "" {
			continue
		}
		if !r.Graphs {
			eager[r.Precision] = r
			continue
		}
		if e, ok := eager[r.Precision]; ok {
			verdict := "SAME"
			if e.StateSHA != r.StateSHA {
				verdict = "DIFFERS"
			}
			fmt.Fprintf(w, "graphs %s %s: %.2f -> %.2f ms/step (x%.2f), state %s\n",
				r.Plugin, r.Precision, e.StepMS, r.StepMS, e.StepMS/r.StepMS, verdict)
		}
	}
}

// writeBenchProfile prints a result's counters per step and, when it was
// profiled, its op tables (by op kind, then by layer shape).
func writeBenchProfile(w io.Writer, r runner.BenchResult) {
	if r.Steps > 0 && r.Counters != (kernels.Counters{}) {
		f := float64(r.Steps)
		fmt.Fprintf(w, "%s %s: %.1f launches, %.1f copies/memsets, %.1f host syncs per step\n", r.Plugin, r.Precision,
			float64(r.Counters.Launches)/f, float64(r.Counters.Copies)/f, float64(r.Counters.Syncs)/f)
	}
	if len(r.Profile) == 0 {
		return
	}
	sum := 0.0
	for _, rec := range r.Profile {
		sum += rec.MS
	}
	n := float64(r.ProfileSteps)
	fmt.Fprintf(w, "\n%s %s profile: %.3f ms/step of op time, %.3f ms/step wall (%d steps)\n",
		r.Plugin, r.Precision, sum/n, r.ProfileWallMS/n, r.ProfileSteps)
	kernels.WriteProfile(w, r.Precision+" by op", kernels.Aggregate(r.Profile, false), r.ProfileSteps, 0)
	kernels.WriteProfile(w, r.Precision+" by op and shape", kernels.Aggregate(r.Profile, true), r.ProfileSteps, 40)
}
