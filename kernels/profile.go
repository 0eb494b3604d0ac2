package kernels

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Counters count what a device backend asked of the driver since it was
// opened: kernel launches, asynchronous copies and memsets (each one a node
// of the stream, like a launch), and host waits for the device (stream or
// event synchronisation, synchronous copies). A step that is launch-bound
// is judged by these as much as by its kernels' times.
type Counters struct {
	Launches, Copies, Syncs int64
}

// Sub is c - o, for the counts of an interval.
func (c Counters) Sub(o Counters) Counters {
	return Counters{c.Launches - o.Launches, c.Copies - o.Copies, c.Syncs - o.Syncs}
}

// OpRecord is one backend op timed by a profiling backend: the op's name
// (e.g. "Conv2dForward"), a key naming its operands (dtype and shapes, which
// in ResNet-18 identify the layer), the device time between events recorded
// before and after its work on the stream, and what it queued.
type OpRecord struct {
	Op, Key string
	MS      float64
	Counters
}

// Profiler is implemented by backends that can time their ops (cuda). While
// profiling, every op is bracketed by events; StopProfile waits for the
// device and returns the records in issue order. Counters work whether or
// not a profile runs.
type Profiler interface {
	StartProfile()
	StopProfile() ([]OpRecord, error)
	Counters() Counters
}

// OpStat is the sum of the records that share an op (and key).
type OpStat struct {
	Op, Key string
	Calls   int
	MS      float64
	Counters
}

// Aggregate sums records per op kind (byKey false) or per op and key (byKey
// true, i.e. per layer shape), sorted by device time, largest first; ties
// keep the order of first appearance.
func Aggregate(recs []OpRecord, byKey bool) []OpStat {
	idx := map[string]int{}
	var out []OpStat
	for _, r := range recs {
		k := r.Op
		if byKey {
			k += "\x00" + r.Key
		}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			s := OpStat{Op: r.Op}
			if byKey {
				s.Key = r.Key
			}
			out = append(out, s)
		}
		s := &out[i]
		s.Calls++
		s.MS += r.MS
		s.Launches += r.Launches
		s.Copies += r.Copies
		s.Syncs += r.Syncs
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].MS > out[b].MS })
	return out
}

// WriteProfile prints stats as a table with per-step numbers (the records
// covered steps steps), a share of the total and a total row. At most limit
// rows are printed (0 = all); the total counts every row.
func WriteProfile(w io.Writer, title string, stats []OpStat, steps, limit int) {
	if steps < 1 {
		steps = 1
	}
	var tot OpStat
	for _, s := range stats {
		tot.Calls += s.Calls
		tot.MS += s.MS
		tot.Launches += s.Launches
		tot.Copies += s.Copies
		tot.Syncs += s.Syncs
	}
	f := float64(steps)
	fmt.Fprintf(w, "%s (per step, %d steps profiled)\n", title, steps)
	fmt.Fprintf(w, "  %9s %6s %7s %8s %7s %6s  %s\n", "us", "share", "calls", "launches", "copies", "syncs", "op")
	row := func(s OpStat, name string) {
		share := 0.0
		if tot.MS > 0 {
			share = 100 * s.MS / tot.MS
		}
		fmt.Fprintf(w, "  %9.1f %5.1f%% %7.1f %8.1f %7.1f %6.1f  %s\n", 1000*s.MS/f, share,
			float64(s.Calls)/f, float64(s.Launches)/f, float64(s.Copies)/f, float64(s.Syncs)/f, name)
	}
	for i, s := range stats {
		if limit > 0 && i == limit {
			fmt.Fprintf(w, "  ... %d more rows\n", len(stats)-limit)
			break
		}
		name := s.Op
		if s.Key != "" {
			name += " " + s.Key
		}
		row(s, name)
	}
	row(tot, "total")
}

// ShapeKey names operands for OpRecord.Key: each non-nil tensor as
// dtype[dims], e.g. "fp16[100 64 8 8] fp16[128 64 3 3]".
func ShapeKey(ts ...*Tensor) string {
	var sb strings.Builder
	for _, t := range ts {
		if t == nil {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%s%v", t.DType, t.Shape)
	}
	return sb.String()
}
