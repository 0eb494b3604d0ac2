package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"resnetlab/kernels"
)

// Backend is the CPU backend. Like every kernels.Backend it is driven by one
// goroutine at a time; internally each op fans out to Workers goroutines.
type Backend struct {
	workers int

	mu  sync.Mutex
	mem kernels.MemStats

	ws workspace // scratch buffers reused across calls (im2col, GEMM packs)
}

// Option configures a Backend.
type Option func(*Backend)

// WithWorkers sets the number of worker goroutines an op may use (default
// runtime.GOMAXPROCS(0)). Results do not depend on it.
func WithWorkers(n int) Option {
	return func(b *Backend) {
		if n < 1 {
			n = 1
		}
		b.workers = n
	}
}

// New returns a CPU backend.
func New(opts ...Option) *Backend {
	b := &Backend{workers: runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		o(b)
	}
	return b
}

var _ kernels.Backend = (*Backend)(nil)

// Name is "cpu".
func (b *Backend) Name() string { return "cpu" }

// Device describes the host and the GEMM kernel in use.
func (b *Backend) Device() string {
	workers := "workers"
	if b.workers == 1 {
		workers = "worker"
	}
	return fmt.Sprintf("CPU %s/%s, %d %s, %s GEMM", runtime.GOOS, runtime.GOARCH, b.workers, workers, kernelName())
}

// Workers is the number of worker goroutines ops fan out to.
func (b *Backend) Workers() int { return b.workers }

// Sync is a no-op: CPU ops complete before they return.
func (b *Backend) Sync() error { return nil }

// MemStats returns the memory accounting (device-equivalent bytes).
func (b *Backend) MemStats() kernels.MemStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem
}

// ResetPeak sets every peak to the bytes currently in use.
func (b *Backend) ResetPeak() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mem.Peak = b.mem.InUse
	b.mem.TotalPeak = b.mem.Total()
}

// account adds delta bytes to a category and updates the peaks.
func (b *Backend) account(cat kernels.Category, delta int64) {
	if cat >= kernels.NumCategories {
		panic(fmt.Sprintf("cpu: memory category %d out of range (want < %d)", cat, kernels.NumCategories))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mem.InUse[cat] += delta
	if b.mem.InUse[cat] > b.mem.Peak[cat] {
		b.mem.Peak[cat] = b.mem.InUse[cat]
	}
	if t := b.mem.Total(); t > b.mem.TotalPeak {
		b.mem.TotalPeak = t
	}
}
