package tui

import (
	"fmt"
	"strings"

	"resnetlab/runner"
)

// header is the top two lines: the spec, the selected run and its status,
// then the run's configuration (plugin x precision x gpus, backend, devices).
type header struct {
	title string
}

// View renders the header for run r (index i of n).
func (h header) View(r *run, i, n, w int, st styles) []string {
	left := st.title.Render("resnetlab") + " " + oneLine(h.title)
	right := fmt.Sprintf("run %d/%d %s %s", i+1, n, r.info.ID, statusBadge(r.status, st))
	cfg := fmt.Sprintf("%s × %s × %s · %s", orDash(r.info.Plugin), orDash(r.info.Precision),
		ranks(r.info), devices(r.info))
	if r.info.Dataset != "" {
		cfg += " · " + r.info.Dataset
	}
	return []string{leftRight(left, right, w), fitLine(cfg, w)}
}

// ranks counts the run's ranks in what they run on: "2 gpus" on CUDA,
// "1 rank" on the CPU (or before the backend is known), never "1 gpu" for a
// run that has none.
func ranks(info runner.RunInfo) string {
	unit := "rank"
	if info.Backend == "cuda" {
		unit = "gpu"
	}
	return fmt.Sprintf("%d %s%s", info.WorldSize, unit, plural(info.WorldSize))
}

func statusBadge(s status, st styles) string {
	txt := s.String()
	switch s {
	case stRunning, stDone:
		return st.ok.Render(txt)
	case stPaused, stPausing, stResuming, stStopped:
		return st.warn.Render(txt)
	case stFailed:
		return st.bad.Render(txt)
	case stInterrupted:
		return st.intr.Render(txt)
	}
	return st.dim.Render(txt)
}

// devices prints the backend and its devices, folding repeats: "cuda: 2× H200".
func devices(info runner.RunInfo) string {
	b := orDash(info.Backend)
	if len(info.Devices) == 0 {
		return b
	}
	var parts []string
	for i := 0; i < len(info.Devices); {
		j := i
		for j < len(info.Devices) && info.Devices[j] == info.Devices[i] {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%d× %s", j-i, info.Devices[i]))
		} else {
			parts = append(parts, info.Devices[i])
		}
		i = j
	}
	return b + ": " + strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
