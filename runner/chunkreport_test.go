package runner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"resnetlab/gemini"
)

// countMoves counts ChunkMoved events as the TUI's strip counts them.
func countMoves(evs []Event, rank int) ChunkMoves {
	var m ChunkMoves
	for _, e := range only[ChunkMoved](evs) {
		if e.Rank == rank {
			m.add(e)
		}
	}
	return m
}

// lastChunks is rank's last ChunksUpdate in evs.
func lastChunks(evs []Event, rank int) (ChunksUpdate, bool) {
	var u ChunksUpdate
	ok := false
	for _, e := range only[ChunksUpdate](evs) {
		if e.Rank == rank {
			u, ok = e, true
		}
	}
	return u, ok
}

// lastMoves is rank's last ChunkMoves in evs, Run and Rank cleared.
func lastMoves(evs []Event, rank int) (ChunkMoves, bool) {
	var m ChunkMoves
	ok := false
	for _, e := range only[ChunkMoves](evs) {
		if e.Rank == rank {
			m, ok = e, true
		}
	}
	m.Run, m.Rank = "", 0
	return m, ok
}

// TestChunkReportsReachRankZero: the chunk snapshot and moves rank 1's
// own events showed (its engine's events through the runner) reach rank 0
// as rank 1's ChunksUpdate, equal to rank 1's last, and its move totals;
// what came before RunStarted is not counted, as the TUI clears it there.
func TestChunkReportsReachRankZero(t *testing.T) {
	pcs := world2(t)
	ev0, ev1 := make(chan Event, 64), make(chan Event, 64)
	j0, j1 := reportJob(pcs[0], ev0), reportJob(pcs[1], ev1)
	j1.gem[0].layout = nil
	info := func(on gemini.Location, states [5]int, bytes int64, id int) gemini.ChunkInfo {
		return gemini.ChunkInfo{ID: id, Bytes: bytes, Payload: on, Optim: on, States: states}
	}
	j1.geminiEvent(gemini.ChunksEvent{Rank: 1, Chunks: []gemini.ChunkInfo{ // the engine's first snapshot
		info(gemini.Device, [5]int{3}, 600, 0), info(gemini.Device, [5]int{2}, 400, 1)}})
	j1.geminiEvent(gemini.MoveEvent{Rank: 1, Chunk: 1, From: gemini.Device, To: gemini.Host, Bytes: 400})
	j1.restartChunks() // RunStarted
	for _, mv := range []gemini.MoveEvent{
		{Rank: 1, Chunk: 0, From: gemini.Device, To: gemini.Host, Bytes: 600},
		{Rank: 1, Chunk: 0, From: gemini.Host, To: gemini.Device, Bytes: 600, Prefetch: true},
		{Rank: 1, Chunk: 1, From: gemini.Device, To: gemini.Host, Clean: true},
		{Rank: 1, Chunk: 0, From: gemini.Device, To: gemini.Host, Bytes: 600},
	} {
		j1.geminiEvent(mv)
	}
	j1.geminiEvent(gemini.ChunksEvent{Rank: 1, Step: 6, Chunks: []gemini.ChunkInfo{
		info(gemini.Device, [5]int{3}, 600, 0), info(gemini.Device, [5]int{0, 0, 2}, 400, 1)}})
	j1.geminiEvent(gemini.ChunksEvent{Rank: 1, Step: 6, Op: "post-fwd layer1.0.conv1", Chunks: []gemini.ChunkInfo{
		info(gemini.Host, [5]int{1, 2}, 600, 0), info(gemini.Nowhere, [5]int{0, 0, 0, 2}, 400, 1)}})
	seen := drain(ev1)
	saw, ok := lastChunks(seen, 1)
	if !ok || saw.Op == "" {
		t.Fatalf("rank 1 showed no mid-step snapshot: %v", seen)
	}
	j1.reportMemory(MemoryUsage{Run: "g", Rank: 1})
	if err := pcs[1].FlushReport(time.Second); err != nil {
		t.Fatal(err)
	}
	j0.collectReports(true)
	evs := drain(ev0)
	if got, ok := lastChunks(evs, 1); !ok || !reflect.DeepEqual(got, saw) {
		t.Errorf("rank 0 shows rank 1's chunks %+v, rank 1 showed %+v", got, saw)
	}
	want := countMoves(seen[2:], 1) // the moves after RunStarted
	if got, ok := lastMoves(evs, 1); !ok || got != want || want.ToHost != 2 || want.Clean != 1 || want.Prefetched != 1 {
		t.Errorf("rank 0 has rank 1's moves %+v, rank 1 made %+v", got, want)
	}
}

// goodChunks is a record of rank 1 with a snapshot of testLayout's chunks.
func goodChunks() (rankRecord, []chunkRecord) {
	rec := rankRecord{Magic: recordMagic, Version: recordVersion, Seq: 1, Rank: 1, NumChunks: 2, ChunkStep: 3,
		Moves: moveRecord{ToDevice: 2, Prefetched: 1, H2D: 1000}}
	copy(rec.ChunkOp[:], "pre-bwd fc")
	return rec, []chunkRecord{{ID: 0, Params: 2, Optim: 2, States: [5]uint16{1, 2}, Bytes: 600},
		{ID: 1, Params: 1, Optim: 0, States: [5]uint16{0, 0, 2}, Bytes: 400}}
}

// TestChunkReportsRefused: a chunk snapshot or move count that no rank of
// the run could have sent (a chunk count other than the model's, however
// large, chunks of other tensors or bytes, unknown places, an operator
// name with control bytes) is refused with one warning naming the rank,
// and shows nothing; a good one shows as rank 1's strip.
func TestChunkReportsRefused(t *testing.T) {
	enc := func(mod func(*rankRecord, *[]chunkRecord)) []byte {
		rec, cs := goodChunks()
		mod(&rec, &cs)
		b, _ := binary.Append(nil, binary.LittleEndian, &rec)
		b, _ = binary.Append(b, binary.LittleEndian, cs)
		return b
	}
	pcs := world2(t)
	for name, b := range map[string][]byte{
		"count":       enc(func(r *rankRecord, cs *[]chunkRecord) { r.NumChunks = 3; *cs = append(*cs, (*cs)[1]) }),
		"huge count":  enc(func(r *rankRecord, cs *[]chunkRecord) { r.NumChunks = math.MaxUint32; *cs = nil }),
		"short":       enc(func(_ *rankRecord, cs *[]chunkRecord) { *cs = (*cs)[:1] }),
		"id":          enc(func(_ *rankRecord, cs *[]chunkRecord) { (*cs)[1].ID = 0 }),
		"tensors":     enc(func(_ *rankRecord, cs *[]chunkRecord) { (*cs)[0].States[4] = 1 }),
		"bytes":       enc(func(_ *rankRecord, cs *[]chunkRecord) { (*cs)[1].Bytes = 401 }),
		"place":       enc(func(_ *rankRecord, cs *[]chunkRecord) { (*cs)[0].Optim = 3 }),
		"op control":  enc(func(r *rankRecord, _ *[]chunkRecord) { r.ChunkOp[2] = 0x1b }),
		"op trailing": enc(func(r *rankRecord, _ *[]chunkRecord) { r.ChunkOp[opLen-1] = 'x' }),
		"step":        enc(func(r *rankRecord, _ *[]chunkRecord) { r.ChunkStep = 16 }),
		"prefetch":    enc(func(r *rankRecord, _ *[]chunkRecord) { r.Moves.Prefetched = 3 }),
		"moves":       enc(func(r *rankRecord, _ *[]chunkRecord) { r.Moves.D2H = -1 }),
	} {
		refusedOnce(t, pcs, name, b)
	}

	if err := pcs[1].Store().Set("report/1", enc(func(*rankRecord, *[]chunkRecord) {}), time.Second); err != nil {
		t.Fatal(err)
	}
	events := make(chan Event, 16)
	j0 := reportJob(pcs[0], events)
	j0.collectReports(true)
	u, ok := lastChunks(drain(events), 1)
	want := []ChunkState{{ID: 0, States: [5]int{1, 2}, Bytes: 600, Params: "host", Optim: "host"},
		{ID: 1, OnDevice: true, States: [5]int{0, 0, 2}, Bytes: 400, Params: "device", Optim: "nowhere"}}
	if !ok || u.Step != 3 || u.Op != "pre-bwd fc" || !reflect.DeepEqual(u.Chunks, want) {
		t.Errorf("a good record shows %+v, want chunks %+v at step 3 after pre-bwd fc", u, want)
	}
	j0 = reportJob(pcs[0], events) // a rank 0 that has no chunks takes none
	j0.gem[0].layout = nil
	j0.collectReports(true)
	if evs := drain(events); len(evs) != 1 || !strings.Contains(evs[0].(Log).Text, "a snapshot of 2 chunks, this run has 0") {
		t.Errorf("chunks for a rank 0 without chunks: %v", evs)
	}
}

// TestWorldChunkStrips: in a world of two processes (goroutines here)
// training Gemini under half its unbudgeted device peak on the CPU, rank
// 0's events end with rank 1's chunk strip as rank 1's own events last
// showed it, and with as many moves of rank 1 as its ChunkMoved events
// after its RunStarted, as the TUI would count them in one process.
func TestWorldChunkStrips(t *testing.T) {
	gem := "[[run]]\nplugin = \"gemini\"\nprecision = \"fp16\"\ngpus = 2\n[gemini]\nplacement = \"auto\"\nchunk_size = \"72KiB\"\n"
	free := finished(t, mustCollect(t, smallBatchSpec(t, gem)))[0]
	s := smallBatchSpec(t, gem+fmt.Sprintf("device_budget = \"%dKiB\"\n", free.PeakDeviceBytes[1]/2>>10))
	pcs := world2(t)
	ev1 := make(chan Event, 1<<16)
	err1 := make(chan error, 1)
	go func() {
		err1 <- RunSpec(context.Background(), s, RunOptions{Headless: true, World: pcs[1]}, ev1, make(chan Command))
		close(ev1)
	}()
	got0, err0 := driveGrid(t, context.Background(), s, RunOptions{World: pcs[0]}, nil)
	if err := errors.Join(err0, <-err1); err != nil {
		t.Fatal(err)
	}
	var got1 []Event
	for e := range ev1 {
		got1 = append(got1, e)
	}
	saw, ok := lastChunks(got1, 1)
	if !ok {
		t.Fatal("rank 1 showed no chunks")
	}
	if got, ok := lastChunks(got0, 1); !ok || !reflect.DeepEqual(got, saw) {
		t.Errorf("rank 0 ends with rank 1's chunks %+v, rank 1 showed %+v", got, saw)
	}
	started := slices.IndexFunc(got1, func(e Event) bool { _, ok := e.(RunStarted); return ok })
	want := countMoves(got1[started:], 1)
	if got, _ := lastMoves(got0, 1); got != want || want.ToDevice == 0 || want.ToHost+want.Clean == 0 {
		t.Errorf("rank 0 ends with rank 1's moves %+v, rank 1 made %+v (the budget must move chunks)", got, want)
	}
	if res := finished(t, got0)[0]; len(res.Gemini) != 2 || res.Gemini[1].EvalH2DBytes != want.EvalH2D ||
		res.Gemini[1].EvalD2HBytes != want.EvalD2H || res.Gemini[1].H2DBytes != want.H2DBytes-want.EvalH2D {
		t.Errorf("rank 0's result for rank 1 %+v; rank 1 moved %+v", res.Gemini, want)
	}
	if len(only[ChunkMoves](got1)) != 0 || len(only[ChunkMoves](got0)) == 0 {
		t.Error("ChunkMoves come from rank 0 only, for the other process's rank")
	}
}

// Every chunk move is counted once and the three reports add up: the
// results' h2d_bytes/d2h_bytes are the training steps' (the GeminiStep
// events summed), eval_h2d_bytes/eval_d2h_bytes what the evaluations moved
// (parameters kept on the host are fetched by every forward pass), their
// sum is what the ChunkMoved events (the TUI) count, and the run's log
// says both parts in those words.
func TestChunkMovesAddUp(t *testing.T) {
	s := smallBatchSpec(t, "[[run]]\nplugin = \"gemini\"\nprecision = \"fp16\"\n[gemini]\nplacement = \"static\"\n"+
		"offload_param_frac = 0.5\nchunk_size = \"72KiB\"\n")
	evs := mustCollect(t, s)
	res := finished(t, evs)[0]
	if len(res.Gemini) != 1 {
		t.Fatalf("gemini statistics %+v", res.Gemini)
	}
	g := res.Gemini[0]
	var h2d, d2h int64
	for _, st := range only[GeminiStep](evs) {
		h2d, d2h = h2d+st.H2DBytes, d2h+st.D2HBytes
	}
	all := countMoves(evs, 0)
	if g.H2DBytes != h2d || g.D2HBytes != d2h || g.EvalH2DBytes == 0 {
		t.Errorf("results h2d %d d2h %d eval h2d %d; the steps moved %d and %d (want equal, and the evaluation moving parameters up)",
			g.H2DBytes, g.D2HBytes, g.EvalH2DBytes, h2d, d2h)
	}
	if g.H2DBytes+g.EvalH2DBytes != all.H2DBytes || g.D2HBytes+g.EvalD2HBytes != all.D2HBytes {
		t.Errorf("results h2d %d + eval %d, d2h %d + eval %d; the ChunkMoved events count %d and %d",
			g.H2DBytes, g.EvalH2DBytes, g.D2HBytes, g.EvalD2HBytes, all.H2DBytes, all.D2HBytes)
	}
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	var line string
	for _, l := range only[Log](evs) {
		if strings.HasPrefix(l.Text, "gemini rank 0: ") && strings.Contains(l.Text, "chunk moves") {
			line = l.Text
		}
	}
	for _, want := range []string{
		fmt.Sprintf("%d chunk moves, %s", all.ToDevice+all.ToHost, mib(all.H2DBytes+all.D2HBytes)),
		fmt.Sprintf("%s in the %d training steps (the results' h2d_bytes %s + d2h_bytes %s)",
			mib(g.H2DBytes+g.D2HBytes), g.Steps, mib(g.H2DBytes), mib(g.D2HBytes)),
		fmt.Sprintf("%s by the evaluations (eval_h2d_bytes %s + eval_d2h_bytes %s)",
			mib(g.EvalH2DBytes+g.EvalD2HBytes), mib(g.EvalH2DBytes), mib(g.EvalD2HBytes)),
	} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
	}
}
