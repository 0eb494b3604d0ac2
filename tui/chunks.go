package tui

import (
	"fmt"
	"strings"
	"unicode"

	"resnetlab/runner"
)

// chunkStrip shows Gemini's chunks: one cell per chunk, its letter the
// dominant tensor state, upper case when the chunk is on the device and
// lower case when it lives in host memory.
type chunkStrip struct {
	gemini bool
	ranks  [][]runner.ChunkState // latest ChunksUpdate per rank
	when   []runner.ChunksUpdate // per rank: that update's step and operator (Chunks unused)
	mem    []runner.GeminiStep   // latest step statistics per rank
	moves  moveCount             // the ChunkMoved events of this process's ranks
	// remote is, per rank of another process, its moves so far (rank 0
	// of a world gets totals from their reports, not one event a move).
	remote map[int]moveCount
}

// moveCount is chunk moves counted as the strip shows them.
type moveCount struct {
	toDev  int   // chunk moves host -> device
	toHost int   // chunk moves device -> host (copies)
	drops  int   // clean payloads freed on the device without a copy
	moved  int64 // bytes moved either way
	eval   int64 // of moved: by the evaluations, outside the training steps
	ahead  int   // of toDev: prefetched ([gemini] max_prefetch)
}

func (m moveCount) plus(o moveCount) moveCount {
	return moveCount{m.toDev + o.toDev, m.toHost + o.toHost, m.drops + o.drops, m.moved + o.moved, m.eval + o.eval, m.ahead + o.ahead}
}

// add counts one move.
func (m *moveCount) add(e runner.ChunkMoved) {
	if e.Prefetch {
		m.ahead++
	}
	switch {
	case e.ToDevice:
		m.toDev++
	case e.Clean:
		m.drops++
	default:
		m.toHost++
	}
	m.moved += e.Bytes
	if e.Eval {
		m.eval += e.Bytes
	}
}

// totalMoves is every rank's moves, in this process or reported.
func (c *chunkStrip) totalMoves() moveCount {
	t := c.moves
	for _, m := range c.remote {
		t = t.plus(m)
	}
	return t
}

func (c *chunkStrip) Update(ev runner.Event) {
	switch e := ev.(type) {
	case runner.RunStarted:
		c.ranks, c.when, c.mem, c.moves, c.remote = nil, nil, nil, moveCount{}, nil
	case runner.ChunksUpdate:
		if e.Rank < 0 {
			return
		}
		for len(c.ranks) <= e.Rank {
			c.ranks = append(c.ranks, nil)
			c.when = append(c.when, runner.ChunksUpdate{})
		}
		c.ranks[e.Rank] = e.Chunks
		c.when[e.Rank] = runner.ChunksUpdate{Step: e.Step, Op: e.Op}
	case runner.GeminiStep:
		if e.Rank < 0 {
			return
		}
		for len(c.mem) <= e.Rank {
			c.mem = append(c.mem, runner.GeminiStep{})
		}
		c.mem[e.Rank] = e
	case runner.ChunkMoved:
		c.moves.add(e)
	case runner.ChunkMoves:
		if c.remote == nil {
			c.remote = map[int]moveCount{}
		}
		c.remote[e.Rank] = moveCount{toDev: e.ToDevice, toHost: e.ToHost, drops: e.Clean,
			moved: e.H2DBytes + e.D2HBytes, eval: e.EvalH2D + e.EvalD2H, ahead: e.Prefetched}
	}
}

// tiePriority breaks ties between equally common states in favour of the
// more active one: a chunk with one COMPUTE tensor is busy, not idle.
var tiePriority = [numStates]int{stCompute, stHoldAfterBwd, stReadyForReduce, stHold, stFree}

// dominant is the state most of the chunk's tensors are in; a chunk
// without tensors counts as FREE.
func dominant(ch runner.ChunkState) int {
	if ch.States == [numStates]int{} {
		return stFree
	}
	best := tiePriority[0]
	for _, s := range tiePriority[1:] {
		if ch.States[s] > ch.States[best] {
			best = s
		}
	}
	return best
}

// glyph is the chunk's cell: state letter, case by placement.
func glyph(ch runner.ChunkState, st styles) string {
	s := dominant(ch)
	r := stateGlyph[s]
	if !ch.OnDevice {
		r = unicode.ToLower(r)
	}
	return st.state[s].Render(string(r))
}

// View renders the pane into exactly h lines of w cells.
func (c *chunkStrip) View(w, h int, st styles) []string {
	if !c.gemini {
		return fitBlock([]string{rule("gemini chunks", w, st),
			st.dim.Render("  n/a: only gemini runs manage chunks")}, w, h)
	}
	if len(c.ranks) == 0 {
		return fitBlock([]string{rule("gemini chunks", w, st),
			st.dim.Render("  waiting for chunk states…")}, w, h)
	}
	counts, pl, n := c.totals()
	title := fmt.Sprintf("gemini chunks · %d chunks · %d on device", n, pl.paramsDev)
	if pl.optimDev+pl.optimHost > 0 {
		title = fmt.Sprintf("gemini chunks %d · params dev %d · optim dev %d host %d", n, pl.paramsDev, pl.optimDev, pl.optimHost)
	}
	foot := c.countsLines(counts, w, st)
	if l := c.phaseLine(st); l != "" {
		foot = append(foot, l)
	}
	foot = append(foot, c.placementLine(st))
	if l := c.splitLine(st); l != "" {
		foot = append(foot, l)
	}
	if l := c.memLine(st); l != "" {
		foot = append(foot, l)
	}
	keep := min(len(foot), max(h-2, 0))
	strip := c.stripLines(w, h-1-keep, st)
	lines := append([]string{rule(title, w, st)}, strip...)
	return fitBlock(append(lines, foot[:keep]...), w, h)
}

// placed counts chunk parts by where they live.
type placed struct{ paramsDev, paramsHost, optimDev, optimHost int }

// totals sums tensor states and placements over every rank's chunks.
func (c *chunkStrip) totals() (counts [numStates]int, pl placed, n int) {
	for _, chunks := range c.ranks {
		for _, ch := range chunks {
			for s, k := range ch.States {
				counts[s] += k
			}
			if ch.OnDevice {
				pl.paramsDev++
			} else {
				pl.paramsHost++
			}
			switch ch.Optim {
			case "device":
				pl.optimDev++
			case "host":
				pl.optimHost++
			}
			n++
		}
	}
	return counts, pl, n
}

// phaseLine says when rank 0's strip was taken: during a step (after
// which operator) or at rest after it.
func (c *chunkStrip) phaseLine(st styles) string {
	if len(c.when) == 0 {
		return ""
	}
	u := c.when[0]
	if u.Op == "" && u.Step == 0 {
		return ""
	}
	if u.Op == "" {
		return st.dim.Render(fmt.Sprintf("r0 at rest after step %d", u.Step))
	}
	return st.dim.Render(fmt.Sprintf("r0 in step %d, after %s", u.Step+1, u.Op))
}

// memLine is rank 0's last step's Gemini statistics.
func (c *chunkStrip) memLine(st styles) string {
	if len(c.mem) == 0 {
		return ""
	}
	m := c.mem[0]
	return st.dim.Render(fmt.Sprintf("step %d: h2d %s d2h %s · evict %d in %s · non-model pk %s · waste %.1f%%",
		m.Step, fmtBytes(m.H2DBytes), fmtBytes(m.D2HBytes), m.Evictions, m.EvictTime.Round(10e3),
		fmtBytes(m.NonModelPeak), m.WastePct))
}

// stripLines wraps each rank's cells over as many lines as needed and cuts
// the whole strip to rows lines, saying how many were left out.
func (c *chunkStrip) stripLines(w, rows int, st styles) []string {
	if rows <= 0 {
		return nil
	}
	lw := len(fmt.Sprintf("r%d", len(c.ranks)-1))
	cw := max(w-lw-1, 1)
	var out []string
	for r, chunks := range c.ranks {
		for i := 0; i < len(chunks) || i == 0; i += cw {
			pre := strings.Repeat(" ", lw+1)
			if i == 0 {
				pre = fmt.Sprintf("%-*s ", lw, fmt.Sprintf("r%d", r))
			}
			var b strings.Builder
			for _, ch := range chunks[i:min(i+cw, len(chunks))] {
				b.WriteString(glyph(ch, st))
			}
			out = append(out, pre+b.String())
		}
	}
	if len(out) > rows {
		left := len(out) - rows + 1
		out = append(out[:rows-1], st.dim.Render(fmt.Sprintf("  … %d more line(s) of chunks", left)))
	}
	return out
}

// countsLines doubles as the legend: each state's letter, name and count,
// packed into lines of w cells (a cut would hide the last states).
func (c *chunkStrip) countsLines(counts [numStates]int, w int, st styles) []string {
	parts := make([]string, numStates)
	for s := range numStates {
		parts[s] = fmt.Sprintf("%s %s %d", st.state[s].Render(string(stateGlyph[s])), stateNames[s], counts[s])
	}
	return pack(parts, w)
}

// placementLine is the legend of the cells' case and every rank's moves
// and their bytes.
func (c *chunkStrip) placementLine(st styles) string {
	m := c.totalMoves()
	ahead := ""
	if m.ahead > 0 {
		ahead = fmt.Sprintf(" (%d prefetched)", m.ahead)
	}
	drops := ""
	if m.drops > 0 { // evictions that copied nothing: the host copy was current
		drops = fmt.Sprintf(" +%d clean", m.drops)
	}
	return st.dim.Render(fmt.Sprintf("UPPER dev lower host · moves →dev %d%s →host %d%s (%s)",
		m.toDev, ahead, m.toHost, drops, fmtBytes(m.moved)))
}

// splitLine, when evaluations moved chunks too, splits the moves' bytes
// into the training steps' and the evaluations' (the results' h2d_bytes +
// d2h_bytes and eval_h2d_bytes + eval_d2h_bytes, summed over ranks).
func (c *chunkStrip) splitLine(st styles) string {
	m := c.totalMoves()
	if m.eval <= 0 {
		return ""
	}
	return st.dim.Render(fmt.Sprintf("moved %s = %s in training steps + %s by evaluations",
		fmtBytes(m.moved), fmtBytes(m.moved-m.eval), fmtBytes(m.eval)))
}
