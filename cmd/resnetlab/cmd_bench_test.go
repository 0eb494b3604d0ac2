package main

import (
	"bytes"
	"context"
	"regexp"
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
	if code != exitUsage || !strings.Contains(errb.String(), "--plugin low_level_zero --precision fp32:") || out.Len() != 0 {
		t.Fatalf("low_level_zero in fp32 must be refused naming both, timing nothing: code %d, %q, %q", code, errb.String(), out.String())
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
	out.Reset()
	code := newCLI(&out, &errb).main(context.Background(), []string{"bench", "--device", "cpu", "--width", "4", "--batch", "2",
		"--steps", "1", "--warmup", "0", "--precision", "fp32", "--profile", "1"})
	if code != exitUsage || !strings.Contains(errb.String(), "cuda") || strings.Contains(out.String(), "ms/step") {
		t.Errorf("--profile on the CPU: exit %d, %q, stdout %q: want a usage error before any step", code, errb.String(), out.String())
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
	// Its byte counts as sizes with a unit (the exact count only in
	// parentheses after one), on one line.
	if msg := errb.String(); !strings.Contains(msg, "gemini: device budget 1.00 KiB (1024 B) exceeded: peak ") ||
		regexp.MustCompile(`[^(0-9][0-9]{4,} B`).MatchString(msg) || strings.Count(msg, "\n") != 1 {
		t.Errorf("budget below the activations: %q, want one line with the byte counts as sizes", msg)
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
		// The size's own "(want ...)" is enough: not a second one.
		"9000EiB": `--budget "9000EiB": size "9000EiB" has unknown unit "EiB" (want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)`,
		"1/x":     `--budget "1/x": want a size or a fraction 1/N with N >= 1`,
	} {
		if _, err := parseBudgets(in); err == nil || err.Error() != want {
			t.Errorf("parseBudgets(%q): %v\nwant %s", in, err, want)
		}
	}
}

// Bad bench flags are usage errors (exit 2) in one line naming the flag
// and what it wants, before anything is timed.
func TestBenchRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--device", "gpu0"}, `resnetlab bench: --device "gpu0": want "auto", "cpu" or "cuda"`},
		{[]string{"--device", "cuda:x"}, `resnetlab bench: --device "cuda:x": want "auto", "cpu" or "cuda"`},
		{[]string{"--plugin", "foo"}, `resnetlab bench: --plugin "foo": want "torch_ddp", "torch_ddp_fp16", "low_level_zero" or "gemini"`},
		{[]string{"--precision", "fp8"}, `resnetlab bench: --precision "fp8": want "fp32", "fp16" or "bf16"`},
		{[]string{"--plugin", "gemini", "--precision", "fp16,fp32"}, "resnetlab bench: --plugin gemini --precision fp32: ColossalAI's Gemini trains in half precision with fp32 master weights (want fp16 or bf16)"},
		{[]string{"--plugin", "torch_ddp_fp16", "--precision", "bf16"}, "resnetlab bench: --plugin torch_ddp_fp16 --precision bf16: torch_ddp_fp16 is torch_ddp with fp16 and cannot train in bf16 (want plugin torch_ddp with precision bf16)"},
		{[]string{"--steps", "0"}, "resnetlab bench: --steps 0: want an integer >= 1"},
		{[]string{"--warmup", "-1"}, "resnetlab bench: --warmup -1: want an integer >= 0"},
		{[]string{"--budget", "2/1"}, `resnetlab bench: --budget "2/1": want a size or a fraction 1/N with N >= 1`},
		// Flags that do not go together, or that the CPU cannot serve, are
		// refused before any step is timed.
		{[]string{"--graphs", "--warmup", "2"}, "resnetlab bench: --graphs needs --warmup > 2: the graph is captured after 2 eager steps, and the capture should not be timed"},
		{[]string{"--graphs"}, "resnetlab bench: --graphs needs a backend that captures graphs (cuda); cpu does not"},
		{[]string{"--profile", "3"}, "resnetlab bench: --profile needs a backend that times its ops (cuda); cpu does not"},
		{[]string{"--budget", "1/2"}, "resnetlab bench: --budget times Gemini (--plugin gemini) eagerly, not torch_ddp"},
	} {
		c, out, errb := testCLI()
		code := runCLI(c, append([]string{"bench", "--device", "cpu", "--width", "4", "--batch", "2", "--steps", "1"}, tc.args...)...)
		first, _, _ := strings.Cut(errb.String(), "\n")
		if code != exitUsage || first != tc.want || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q\nwant exit 2 and %s", tc.args, code, out, errb, tc.want)
		}
	}
}

// Without --precision a plugin is timed in the default precisions it can
// train in: gemini and low_level_zero drop fp32, torch_ddp_fp16 is
// torch_ddp in fp16.
func TestBenchDefaultPrecisionsFitThePlugin(t *testing.T) {
	for plugin, want := range map[string]string{"torch_ddp": "torch_ddp fp32,fp16", "torch_ddp_fp16": "torch_ddp fp16",
		"low_level_zero": "low_level_zero fp16", "gemini": "gemini fp16"} {
		p, precs, err := benchPrecisions(plugin, benchDefaultPrecisions, false)
		if got := p + " " + strings.Join(precs, ","); err != nil || got != want {
			t.Errorf("%s: %q, %v (want %q)", plugin, got, err, want)
		}
	}
	c, out, errb := testCLI()
	code := runCLI(c, "bench", "--device", "cpu", "--width", "4", "--batch", "2", "--steps", "1", "--warmup", "0", "--plugin", "gemini")
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); code != exitOK || len(lines) != 1 || !strings.HasPrefix(lines[0], "gemini         fp16") {
		t.Errorf("bench --plugin gemini: exit %d, stdout %q, stderr %q", code, out, errb)
	}
}
