package cpu

import (
	"strings"
	"testing"
)

// The device line (headless prints it for every run) counts its workers
// in good English: "1 worker", "2 workers".
func TestDeviceCountsWorkers(t *testing.T) {
	for n, want := range map[int]string{1: ", 1 worker, ", 2: ", 2 workers, ", 16: ", 16 workers, "} {
		if got := New(WithWorkers(n)).Device(); !strings.Contains(got, want) {
			t.Errorf("%d workers: %q, want it to say %q", n, got, want)
		}
	}
}
