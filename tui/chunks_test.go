package tui

import (
	"strings"
	"testing"

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
