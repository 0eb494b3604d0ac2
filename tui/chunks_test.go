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
