package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
