package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"resnetlab/runner"
)

func TestChunkStripCountsPrefetches(t *testing.T) {
	var c chunkStrip
	for _, e := range []runner.ChunkMoved{
		{Chunk: 1, ToDevice: true, Bytes: 10},
		{Chunk: 2, ToDevice: true, Bytes: 20, Prefetch: true},
		{Chunk: 1, ToDevice: false, Bytes: 10},
	} {
		c.Update(e)
	}
	line := c.placementLine(newStyles(true))
	if !strings.Contains(line, "→dev 2 (1 prefetched) →host 1") {
		t.Fatalf("placement line %q: want 2 to the device, 1 of them prefetched, 1 to host", line)
	}
	c.Update(runner.RunStarted{})
	if line := c.placementLine(newStyles(true)); strings.Contains(line, "prefetched") {
		t.Fatalf("after a new run: %q still counts prefetches", line)
	}
}

// A clean drop frees a device payload without a copy: it is not a move
// down, and the strip counts it apart.
func TestChunkStripCountsCleanDropsApart(t *testing.T) {
	var c chunkStrip
	for _, e := range []runner.ChunkMoved{
		{Chunk: 1, ToDevice: true, Bytes: 10},
		{Chunk: 1, Clean: true},
		{Chunk: 2, Bytes: 20},
	} {
		c.Update(e)
	}
	line := c.placementLine(newStyles(true))
	if !strings.Contains(line, "→dev 1 →host 1 +1 clean (30B)") {
		t.Fatalf("placement line %q: want one upload, one copy down and one clean drop", line)
	}
}

// Rank 0 of a world of processes gets the other ranks' chunks as their
// ChunksUpdate and their moves as running totals (ChunkMoves): its strip
// and comparison numbers are those of one process training both ranks,
// which gets a ChunkMoved per move.
func TestChunkStripOtherProcesses(t *testing.T) {
	chunks := func(rank int, letters ...bool) runner.ChunksUpdate {
		u := runner.ChunksUpdate{Rank: rank, Step: 4}
		for i, on := range letters {
			u.Chunks = append(u.Chunks, runner.ChunkState{ID: i, OnDevice: on, States: [5]int{i, 1}, Params: "host", Optim: "host"})
		}
		return u
	}
	r0 := []runner.ChunkMoved{{Rank: 0, ToDevice: true, Bytes: 10}}
	r1 := []runner.ChunkMoved{{Rank: 1, ToDevice: true, Bytes: 20, Prefetch: true}, {Rank: 1, Bytes: 20},
		{Rank: 1, Clean: true}, {Rank: 1, ToDevice: true, Bytes: 30}}
	one, world := chunkStrip{gemini: true}, chunkStrip{gemini: true}
	var oneCmp, worldCmp cmpStats
	feed := func(c *chunkStrip, s *cmpStats, evs ...runner.Event) {
		for _, e := range evs {
			c.Update(e)
			s.Update(e)
		}
	}
	start := runner.RunStarted{Info: runner.RunInfo{Plugin: "gemini"}}
	feed(&one, &oneCmp, start, chunks(0, true, false), chunks(1, false, true, true), r0[0])
	for _, e := range r1 {
		feed(&one, &oneCmp, e)
	}
	feed(&world, &worldCmp, start, chunks(0, true, false), r0[0], chunks(1, false, true, true),
		runner.ChunkMoves{Rank: 1, ToDevice: 1, Prefetched: 1, H2DBytes: 20}, // an earlier report: replaced
		runner.ChunkMoves{Rank: 1, ToDevice: 2, ToHost: 1, Clean: 1, Prefetched: 1, H2DBytes: 50, D2HBytes: 20})
	st := newStyles(false)
	got, want := ansi.Strip(strings.Join(world.View(80, 12, st), "\n")), ansi.Strip(strings.Join(one.View(80, 12, st), "\n"))
	if got != want {
		t.Errorf("world of processes:\n%s\none process:\n%s", got, want)
	}
	if !strings.Contains(got, "→dev 3 (1 prefetched) →host 1 +1 clean (80B)") || !strings.Contains(got, "r1 cCF") {
		t.Errorf("world of processes:\n%s\nwant rank 1's strip, and its moves added to rank 0's", got)
	}
	if worldCmp.worst() != oneCmp.worst() {
		t.Errorf("comparison: world %+v, one process %+v", worldCmp.worst(), oneCmp.worst())
	}
	world.Update(start)
	if l := world.placementLine(st); !strings.Contains(l, "→dev 0 →host 0 (0B)") {
		t.Errorf("after a new run: %q", l)
	}
}

// The strip's moves say how much of their bytes the training steps and the
// evaluations moved (the results' h2d+d2h and eval_h2d+eval_d2h), for this
// process's ranks and the reported ones alike; the comparison's h2d/d2h
// bars count every move.
func TestStripSplitsTrainAndEvalMoves(t *testing.T) {
	const mib = 1 << 20
	r := newRun(runner.RunInfo{ID: "g", Plugin: "gemini", WorldSize: 2})
	r.Update(runner.RunStarted{Info: r.info})
	for _, mv := range []runner.ChunkMoved{
		{Run: "g", Rank: 0, ToDevice: true, Bytes: 3 * mib},
		{Run: "g", Rank: 0, Bytes: 1 * mib},
		{Run: "g", Rank: 0, ToDevice: true, Bytes: 2 * mib, Eval: true},
	} {
		r.Update(mv)
	}
	r.Update(runner.ChunkMoves{Run: "g", Rank: 1, ToDevice: 2, H2DBytes: 4 * mib, EvalH2D: 1 * mib})
	r.Update(runner.ChunksUpdate{Run: "g", Rank: 0, Chunks: fakeChunks(0, 1)})
	st := newStyles(true)
	if line, want := ansi.Strip(r.chunks.splitLine(st)), "moved 10.0M = 7.00M in training steps + 3.00M by evaluations"; line != want {
		t.Errorf("strip split %q, want %q", line, want)
	}
	if s := ansi.Strip(strings.Join(r.chunks.View(84, 12, st), "\n")); !strings.Contains(s, "(10.0M)") ||
		!strings.Contains(s, "moved 10.0M = 7.00M in training steps") {
		t.Errorf("the strip should show the moves and their split:\n%s", s)
	}
	if _, s, _ := allBarGroups[6].value(r); s != "5.00M" {
		t.Errorf("h2d/rank %s, want rank 0's 5.00M, evaluation included", s)
	}
	r.Update(runner.RunStarted{Info: r.info})
	r.Update(runner.ChunkMoved{Run: "g", Rank: 0, ToDevice: true, Bytes: 3 * mib})
	if line := ansi.Strip(r.chunks.placementLine(st)); !strings.HasSuffix(line, "(3.00M)") || r.chunks.splitLine(st) != "" {
		t.Errorf("no evaluation moves: strip line %q, want only the bytes and no split", line)
	}
}
