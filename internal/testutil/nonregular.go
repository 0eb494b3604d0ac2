package testutil

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// HostileFiles makes a FIFO at fifo and a symlink to /dev/zero at zero:
// reading either the naive way blocks or never ends. Where mkfifo fails
// the test is skipped.
func HostileFiles(tb testing.TB, fifo, zero string) {
	tb.Helper()
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		tb.Skip("mkfifo:", err)
	}
	if err := os.Symlink("/dev/zero", zero); err != nil {
		tb.Fatal(err)
	}
}

// RefusedPromptly runs fn, a read of path, and fails the test unless it
// returns within 5 s an error that names path and says it "is not a
// regular file".
func RefusedPromptly(tb testing.TB, path string, fn func() error) {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "is not a regular file") {
			tb.Fatalf("%s: want 'not a regular file' naming the path, got %v", path, err)
		}
	case <-time.After(5 * time.Second):
		tb.Fatalf("%s: still reading after 5s", path)
	}
}
