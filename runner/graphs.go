package runner

import (
	"fmt"
	"resnetlab/spec"

	"resnetlab/engine"
	"resnetlab/kernels"
)

// cuda_graphs: the engine replays the compute part of a step (forward,
// loss, backward) as a captured graph; see engine/graph.go for the split.
// The runner decides where that is possible, logs why not elsewhere, and
// drops the graph after an evaluation (it runs the same model at another
// batch size, which may move its activation buffers).

// trainWrap, when set (tests), wraps every rank's backend of a run, e.g.
// in a graphtest.Recorder that captures on the CPU.
var trainWrap func(kernels.Backend) kernels.Backend

// graphsWhyNot is "" when rank backend be replays its steps as graphs,
// else why it steps eagerly although cuda_graphs is set.
func (j *job) graphsWhyNot(be kernels.Backend) string {
	switch {
	case j.cell.Plugin == spec.PluginGemini:
		return "gemini's hooks move chunks between host and device inside the step"
	case j.cell.WorldSize > 1:
		return fmt.Sprintf("the collectives of %d ranks synchronise on the host inside the step", j.cell.WorldSize)
	}
	if _, ok := be.(kernels.Capturer); !ok {
		return fmt.Sprintf("the %s backend cannot capture graphs", be.Name())
	}
	return ""
}

// withGraphs is the engine config of rank backend be.
func (j *job) withGraphs(c engine.EngineConfig, be kernels.Backend) engine.EngineConfig {
	c.Graphs = j.spec.CUDAGraphs && j.graphsWhyNot(be) == ""
	return c
}

// logGraphs says, once, whether the run's steps are graphs.
func (j *job) logGraphs() {
	if !j.spec.CUDAGraphs {
		return
	}
	if why := j.graphsWhyNot(j.ranks[0].be); why != "" {
		j.logf(LevelWarn, "cuda_graphs = true has no effect on this run (eager steps): %s", why)
		return
	}
	j.logf(LevelInfo, "cuda_graphs: forward, loss and backward replay as a graph after %d eager steps; "+
		"the loss read, loss scaler and Adam stay eager", engine.DefaultGraphWarmup)
}

// graphEngine is a trainer that replays captured steps (engine.Engine).
type graphEngine interface {
	DropGraph()
	GraphStats() engine.GraphStats
}

// dropGraphs makes every rank capture again after its warm-up steps.
func (j *job) dropGraphs() {
	for _, rs := range j.ranks {
		if g, ok := rs.eng.(graphEngine); ok {
			g.DropGraph()
		}
	}
}

// graphSummary logs rank 0's captures and replays at the end of a run.
func (j *job) graphSummary(eng engine.Trainer) {
	g, ok := eng.(graphEngine)
	if !ok || !j.spec.CUDAGraphs {
		return
	}
	if st := g.GraphStats(); st.Captures > 0 {
		j.logf(LevelInfo, "cuda_graphs rank 0: %d steps replayed from %d captures", st.Replays, st.Captures)
	}
}
