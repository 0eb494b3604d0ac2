package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"resnetlab/kernels"
	"resnetlab/runner"
)

func TestBenchPrintsEveryPrecision(t *testing.T) {
	var out, errb bytes.Buffer
	c := newCLI(&out, &errb)
	code := c.main(context.Background(), []string{"bench", "--device", "cpu", "--width", "4", "--batch", "4",
		"--steps", "2", "--warmup", "1", "--precision", "fp32,bf16", "--plugin", "low_level_zero"})
	if code != exitFailed || !strings.Contains(errb.String(), "fp32") {
		t.Fatalf("low_level_zero in fp32 must fail with a message naming fp32: code %d, %q", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	code = c.main(context.Background(), []string{"bench", "--device", "cpu", "--width", "4", "--batch", "4",
		"--steps", "2", "--warmup", "1", "--precision", "fp32,fp16"})
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "fp32") || !strings.Contains(lines[1], "fp16") || !strings.Contains(lines[1], "ms/step") {
		t.Fatalf("bench output:\n%s", out.String())
	}
}

func TestBenchProfilePrintsTables(t *testing.T) {
	r := runner.BenchResult{Plugin: "torch_ddp", Precision: "fp16", Steps: 4,
		Counters: kernels.Counters{Launches: 800, Copies: 8, Syncs: 8}, ProfileSteps: 2, ProfileWallMS: 6,
		Profile: []kernels.OpRecord{
			{Op: "Conv2dForward", Key: "fp16[100 64 8 8]", MS: 1, Counters: kernels.Counters{Launches: 2}},
			{Op: "Copy", Key: "fp32[10]", MS: 0.5, Counters: kernels.Counters{Launches: 1}},
		}}
	var out bytes.Buffer
	writeBenchProfile(&out, r)
	s := out.String()
	for _, want := range []string{"200.0 launches, 2.0 copies/memsets, 2.0 host syncs per step",
		"0.750 ms/step of op time, 3.000 ms/step wall", "fp16 by op", "fp16 by op and shape", "Conv2dForward fp16[100 64 8 8]"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in:\n%s", want, s)
		}
	}
	var errb bytes.Buffer
	code := newCLI(&out, &errb).main(context.Background(), []string{"bench", "--device", "cpu", "--width", "4", "--batch", "2",
		"--steps", "1", "--warmup", "0", "--precision", "fp32", "--profile", "1"})
	if code != exitFailed || !strings.Contains(errb.String(), "cuda") {
		t.Errorf("--profile on the CPU: exit %d, %q", code, errb.String())
	}
}

func TestBenchGraphVerdicts(t *testing.T) {
	res := []runner.BenchResult{
		{Plugin: "torch_ddp", Precision: "fp32", StepMS: 4, StateSHA: "aaaa"},
		{Plugin: "torch_ddp", Precision: "fp32", StepMS: 2, StateSHA: "aaaa", Graphs: true},
		{Plugin: "torch_ddp", Precision: "fp16", StepMS: 3, StateSHA: "bbbb"},
		{Plugin: "torch_ddp", Precision: "fp16", StepMS: 3, StateSHA: "cccc", Graphs: true},
	}
	var out bytes.Buffer
	writeGraphVerdicts(&out, res)
	want := "graphs torch_ddp fp32: 4.00 -> 2.00 ms/step (x2.00), state SAME\n" +
		"graphs torch_ddp fp16: 3.00 -> 3.00 ms/step (x1.00), state DIFFERS\n"
	if out.String() != want {
		t.Errorf("verdicts:\n%s\nwant:\n%s", out.String(), want)
	}
}

// Gemini's budgets: each budgeted run is timed after the unlimited one and
// names its budget; a budget below the activations fails naming it; bad
// lists and a budget for another plugin are usage errors.
func TestBenchGeminiBudgets(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "--device", "cpu", "--width", "4", "--batch", "4", "--steps", "2", "--warmup", "2",
		"--precision", "fp16", "--plugin", "gemini", "--budget"}
	if code := newCLI(&out, &errb).main(context.Background(), append(args, "64MiB")); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "budget") || !strings.Contains(lines[1], "budget 64.00 MiB") {
		t.Fatalf("bench output:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := newCLI(&out, &errb).main(context.Background(), append(args, "1KiB")); code != exitFailed ||
		!strings.Contains(errb.String(), "budget 1.00 KiB") || !strings.Contains(errb.String(), "non-model") {
		t.Errorf("budget below the activations: exit %d, %q", code, errb.String())
	}
	for _, bad := range [][]string{append(args, "1/0"), append(args, "lots"), {"bench", "--budget", "1/2"}} {
		errb.Reset()
		if code := newCLI(&out, &errb).main(context.Background(), bad); code == exitOK || !strings.Contains(errb.String(), "budget") {
			t.Errorf("%v: exit %d, %q (want an error naming the budget)", bad, code, errb.String())
		}
	}
}

// A bad --budget size says what is wrong with it, as the spec's sizes do.
func TestParseBudgetsSaysWhy(t *testing.T) {
	for in, want := range map[string]string{
		"-5MiB": `--budget "-5MiB": size "-5MiB" must not be negative (want a size, e.g. 139MB, or a fraction 1/N)`,
		"1e3MB": `--budget "1e3MB": size "1e3MB" is in exponent notation, which sizes do not take (write "1000MB") (want a size, e.g. 139MB, or a fraction 1/N)`,
		"0":     `--budget "0": a budget of 0 bytes (want a size, e.g. 139MB, or a fraction 1/N)`,
	} {
		if _, err := parseBudgets(in); err == nil || err.Error() != want {
			t.Errorf("parseBudgets(%q): %v\nwant %s", in, err, want)
		}
	}
}
