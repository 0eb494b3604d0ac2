package runner

import (
	"strings"
	"testing"
	"time"
)

// The estimate leaves the warm-up step out and is given once.
func TestEstimatorSkipsWarmUpAndSpeaksOnce(t *testing.T) {
	var e estimator
	steps := []time.Duration{time.Second, 10, 20, 30, 40, 50, 60}
	var got []time.Duration
	for _, dt := range steps {
		if per, ok := e.observe(dt); ok {
			got = append(got, per)
		}
	}
	if len(got) != 1 || got[0] != 25 { // mean of 10, 20, 30, 40
		t.Fatalf("estimates %v, want one of 25ns (the first step left out)", got)
	}
}

// A run says once, after its first steps, how long the rest will take.
func TestRunLogsAnEstimate(t *testing.T) {
	s := tinySpec(t, "[[run]]\nplugin = \"torch_ddp\"\n") // 6 steps per epoch, 2 epochs
	evs, err := collect(t, s, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var est []string
	for _, ev := range evs {
		if l, ok := ev.(Log); ok && strings.HasPrefix(l.Text, "estimate:") {
			est = append(est, l.Text)
		}
	}
	if len(est) != 1 || !strings.Contains(est[0], "(7 steps at ") || !strings.Contains(est[0], "on cpu") {
		t.Fatalf("estimate lines %q, want one saying 7 steps are left on cpu", est)
	}
}
