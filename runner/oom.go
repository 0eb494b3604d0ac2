package runner

import (
	"errors"
	"fmt"
	"resnetlab/spec"
	"strings"

	"resnetlab/device"
)

// OOMError is a rank that ran out of device memory: what it asked for,
// what the device held at that moment, and what to change in the spec.
// It wraps the driver's error, so errors.As(err, &*cuda.Error) still works.
type OOMError struct {
	Rank         int
	Device       string // the backend's device name, e.g. "NVIDIA H200 #0"
	Run          string // the cell's ID, e.g. "torch_ddp-fp32-2"
	Plugin       string
	Request      int64 // bytes the failed allocation asked for; -1 if unknown
	InUse        int64 // bytes held by live tensors; -1 if unknown
	Reserved     int64 // bytes the caching allocator held from the driver; -1 if unknown
	Capacity     int64 // the device's memory; 0 if unknown
	DeviceBudget int64 // the spec's [gemini] device_budget; 0 = unlimited
	Err          error // the driver error
}

func (e *OOMError) Unwrap() error { return e.Err }

func (e *OOMError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d", e.Rank)
	if e.Device != "" {
		fmt.Fprintf(&b, " on %s", e.Device)
	}
	b.WriteString(" ran out of device memory")
	if e.Run != "" {
		fmt.Fprintf(&b, " (run %s)", e.Run)
	}
	b.WriteString(": ")
	b.WriteString(e.usage())
	b.WriteString(". To fit: ")
	b.WriteString(e.advice())
	fmt.Fprintf(&b, " [%v]", e.Err)
	return b.String()
}

// usage says what was asked for and what the device held.
func (e *OOMError) usage() string {
	what := "an allocation failed"
	if e.Request >= 0 {
		what = "allocating " + spec.FormatSize(e.Request) + " failed"
	}
	var held []string
	if e.InUse >= 0 {
		held = append(held, spec.FormatSize(e.InUse)+" in use")
	}
	if e.Reserved >= 0 {
		held = append(held, spec.FormatSize(e.Reserved)+" reserved")
	}
	s := what
	if len(held) > 0 {
		s += " with " + strings.Join(held, " and ")
	}
	if e.Capacity > 0 {
		s += " of " + spec.FormatSize(e.Capacity)
	}
	return s
}

// advice is what to change in the spec, depending on where the run is.
func (e *OOMError) advice() string {
	budget := suggestBudget(e.Capacity)
	if e.Plugin == spec.PluginGemini {
		if e.DeviceBudget > 0 {
			return fmt.Sprintf("lower [gemini] device_budget (now %s), or set placement = \"auto\" "+
				"so the warm-up statistics decide what stays on the device; or lower batch_size.",
				spec.FormatSize(e.DeviceBudget))
		}
		return fmt.Sprintf("set a [gemini] device_budget below the device's memory (e.g. device_budget = %q) "+
			"so chunks that do not fit wait in host memory; or lower batch_size.", budget)
	}
	return fmt.Sprintf("run plugin gemini with a [gemini] device_budget (e.g. device_budget = %q), "+
		"which keeps chunks that do not fit in host memory; or shard weights and optimizer state "+
		"over more gpus with low_level_zero or gemini; or lower batch_size.", budget)
}

// suggestBudget is a device_budget value that leaves room for the CUDA
// context and fragmentation: 80% of the capacity, in whole GiB.
func suggestBudget(capacity int64) string {
	const gib = 1 << 30
	if capacity <= 0 {
		return "8GiB"
	}
	return fmt.Sprintf("%dGiB", max(1, capacity*8/10/gib))
}

// IsOOM reports whether err holds a CUDA out-of-memory driver error.
func IsOOM(err error) bool {
	_, ok := device.OOMCause(err)
	return ok
}

// explainOOM returns err as an *OOMError when it holds a CUDA out-of-memory
// error, and err unchanged otherwise. st, when not nil, fills in the
// device's usage if the driver error does not carry it.
func explainOOM(err error, rank int, deviceName string, cell spec.Cell, deviceBudget int64, st *memSnapshot) error {
	oom, ok := device.OOMCause(err)
	if !ok {
		return err
	}
	var oe *OOMError
	if errors.As(err, &oe) { // already explained (a rank's error seen twice)
		return err
	}
	e := &OOMError{Rank: rank, Device: deviceName, Run: cell.ID, Plugin: cell.Plugin,
		Request: -1, InUse: -1, Reserved: -1, DeviceBudget: deviceBudget, Err: oom.Err}
	if !parseAllocCall(oom.Call, e) && st != nil {
		e.InUse, e.Capacity = st.inUse, st.capacity
	}
	return e
}

// memSnapshot is a backend's usage when the allocator could not say.
type memSnapshot struct{ inUse, capacity int64 }

// parseAllocCall reads the sizes the CUDA allocator puts in a failed
// cuMemAlloc's Call: "cuMemAlloc_v2(N bytes; N in use, N reserved,
// capacity N)". It reports whether the call had that form.
func parseAllocCall(call string, e *OOMError) bool {
	var req, inUse, reserved, capacity int64
	n, _ := fmt.Sscanf(call, "cuMemAlloc_v2(%d bytes; %d in use, %d reserved, capacity %d)",
		&req, &inUse, &reserved, &capacity)
	if n != 4 {
		return false
	}
	e.Request, e.InUse, e.Reserved, e.Capacity = req, inUse, reserved, capacity
	return true
}

// explainOOM is the job's glue: it explains rank's error with the run's
// plugin, budget and the rank's device. The rank pool calls it on the
// error of each rank (ranks.go), after a recovered panic kept its error
// value with %w.
func (j *job) explainOOM(rank int, err error) error {
	if !IsOOM(err) {
		return err
	}
	name := ""
	var st *memSnapshot
	if rank >= 0 && rank < len(j.ranks) && j.ranks[rank] != nil && j.ranks[rank].be != nil {
		be := j.ranks[rank].be
		name = be.Device()
		ms := be.MemStats()
		st = &memSnapshot{inUse: ms.Total(), capacity: ms.Capacity}
	}
	return explainOOM(err, rank, name, j.cell, j.spec.Gemini.DeviceBudget, st)
}
