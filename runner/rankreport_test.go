package runner

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"resnetlab/comm"
	"resnetlab/report"
	"resnetlab/spec"
)

// world2 joins a world of two ranks on loopback (goroutines standing in
// for the processes).
func world2(t *testing.T) [2]*comm.ProcComm {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var pcs [2]*comm.ProcComm
	var errs [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			pcs[r], errs[r] = comm.JoinWorld(ctx, comm.Env{Rank: r, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}, "f")
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() { pcs[1].Close(); pcs[0].Close() })
	return pcs
}

// reportJob is rank r's job of a two-rank gemini run of 3 epochs x 5 steps,
// as far as reports need it.
func reportJob(pc *comm.ProcComm, events chan Event) *job {
	j := &job{spec: &spec.Spec{Epochs: 3}, cell: spec.Cell{Plugin: spec.PluginGemini, WorldSize: 2},
		info: RunInfo{ID: "g", StepsPerEpoch: 5}, world: pc, events: events, gem: make([]geminiRank, 1),
		result: &report.Result{PeakDeviceBytes: make([]int64, 2), PeakHostBytes: make([]int64, 2)},
		pool:   &rankPool{first: pc.Rank()}}
	j.gem[0].layout = testLayout()
	return j
}

// testLayout is reportJob's chunks, as its engine's first snapshot would
// give them: two chunks of 3 and 2 tensors.
func testLayout() []ChunkState {
	return []ChunkState{{ID: 0, OnDevice: true, States: [5]int{3}, Bytes: 600, Params: "device", Optim: "device"},
		{ID: 1, OnDevice: true, States: [5]int{2}, Bytes: 400, Params: "device", Optim: "device"}}
}

// drain returns the events sent so far.
func drain(events chan Event) []Event {
	var evs []Event
	for {
		select {
		case e := <-events:
			evs = append(evs, e)
		default:
			return evs
		}
	}
}

// TestRankReportsReachRankZero: what rank 1 measured (its own numbers,
// unlike rank 0's) arrives on rank 0 as events of rank 1 and in rank 0's
// result.
func TestRankReportsReachRankZero(t *testing.T) {
	pcs := world2(t)
	ev0, ev1 := make(chan Event, 64), make(chan Event, 64)
	j0, j1 := reportJob(pcs[0], ev0), reportJob(pcs[1], ev1)
	j1.epoch, j1.step = 1, 4
	j1.result.PeakDeviceBytes[1], j1.result.PeakHostBytes[1] = 7777, 8888
	j1.gem[0].total = report.GeminiMemStats{Steps: 9, H2DBytes: 4096, EvictSeconds: 0.5, ChunkWastePct: 12.5}
	j1.gem[0].last = gemRecord{Step: 9, H2D: 512, PeakDevice: 3000, WastePct: 12.5}
	u := MemoryUsage{Run: "g", Rank: 1, Device: [6]int64{1, 2, 3, 4, 5, 6}, DevicePeak: 6000, HostPeak: 9000,
		HostPageable: 100, DeviceIsHost: true}
	j1.reportMemory(u)
	if err := pcs[1].FlushReport(time.Second); err != nil {
		t.Fatal(err)
	}
	if evs := drain(ev1); len(evs) != 0 {
		t.Errorf("rank 1 emitted %v: its front end is rank 0's", evs)
	}
	j0.collectReports(true)
	j0.collectReports(true) // the same record again: forwarded once
	evs := drain(ev0)
	if len(evs) != 3 {
		t.Fatalf("rank 0 emitted %d events, want rank 1's MemoryUsage, GeminiStep and ChunkMoves: %v", len(evs), evs)
	}
	want := u
	want.Epoch, want.Step = 1, 4
	if got, ok := evs[0].(MemoryUsage); !ok || got != want {
		t.Errorf("rank 0 emitted %+v, want %+v", evs[0], want)
	}
	if g, ok := evs[1].(GeminiStep); !ok || g.Rank != 1 || g.H2DBytes != 512 || g.PeakDevice != 3000 {
		t.Errorf("rank 0 emitted %+v, want rank 1's GeminiStep", evs[1])
	}
	if r := j0.result; r.PeakDeviceBytes[1] != 7777 || r.PeakHostBytes[1] != 8888 || r.PeakDeviceBytes[0] != 0 {
		t.Errorf("rank 0's result peaks: device %v host %v", r.PeakDeviceBytes, r.PeakHostBytes)
	}
	if g, ok := j0.remoteGemini(1); !ok || g.Steps != 9 || g.H2DBytes != 4096 || g.EvictSeconds != 0.5 {
		t.Errorf("rank 1's gemini totals on rank 0: %+v", g)
	}
}

// TestRankReportsRefused: a record no rank of the run could have sent is
// refused with one warning naming the rank, however often it comes, and
// nothing of it reaches the events or the result.
func TestRankReportsRefused(t *testing.T) {
	good := func() rankRecord {
		return rankRecord{Magic: recordMagic, Version: recordVersion, Seq: 1, Rank: 1, PeakDevice: 5}
	}
	enc := func(mod func(*rankRecord)) []byte {
		r := good()
		mod(&r)
		b, _ := binary.Append(nil, binary.LittleEndian, &r)
		return b
	}
	pcs := world2(t)
	for name, b := range map[string][]byte{
		"short":      enc(func(*rankRecord) {})[:40],
		"long":       append(enc(func(*rankRecord) {}), 0),
		"over limit": make([]byte, comm.MaxReport+1),
		"magic":      enc(func(r *rankRecord) { r.Magic[0] = 'x' }),
		"version":    enc(func(r *rankRecord) { r.Version = recordVersion + 1 }),
		"version 1":  enc(func(r *rankRecord) { r.Version = 1 }),
		"rank":       enc(func(r *rankRecord) { r.Rank = 0 }),
		"epoch":      enc(func(r *rankRecord) { r.Epoch = 4 }),
		"step":       enc(func(r *rankRecord) { r.Step = -1 }),
		"negative":   enc(func(r *rankRecord) { r.Device[3] = -1 }),
		"huge":       enc(func(r *rankRecord) { r.PeakHost = math.MaxInt64 }),
		"nan":        enc(func(r *rankRecord) { r.GemTotal.WastePct = math.NaN() }),
	} {
		j0, ok := refusedOnce(t, pcs, name, b)
		if !ok {
			continue
		}
		if j0.result.PeakDeviceBytes[1] != 0 {
			t.Errorf("%s: the result took peak %d", name, j0.result.PeakDeviceBytes[1])
		}
	}
	if err := pcs[1].Store().Set("report/1", enc(func(*rankRecord) {}), time.Second); err != nil {
		t.Fatal(err)
	}
	j0 := reportJob(pcs[0], make(chan Event, 16))
	if j0.collectReports(true); j0.result.PeakDeviceBytes[1] != 5 { // the control: a good record is taken
		t.Errorf("a good record: peak %d, want 5", j0.result.PeakDeviceBytes[1])
	}
}

// refusedOnce stores b as rank 1's report, lets rank 0 collect reports
// three times and checks that it logged exactly one one-line warning
// naming rank 1 (a refusal is logged once); it returns rank 0's job and
// whether the check held.
func refusedOnce(t *testing.T, pcs [2]*comm.ProcComm, name string, b []byte) (*job, bool) {
	t.Helper()
	if err := pcs[1].Store().Set("report/1", b, time.Second); err != nil {
		t.Fatal(err)
	}
	events := make(chan Event, 16)
	j0 := reportJob(pcs[0], events)
	for range 3 {
		j0.collectReports(true)
	}
	evs := drain(events)
	if len(evs) != 1 {
		t.Errorf("%s: %d events %v, want one warning", name, len(evs), evs)
		return j0, false
	}
	l, ok := evs[0].(Log)
	if !ok || l.Level != LevelWarn || !strings.Contains(l.Text, "rank 1") || strings.Contains(l.Text, "\n") {
		t.Errorf("%s: %+v, want a one-line warning naming rank 1", name, evs[0])
		return j0, false
	}
	return j0, true
}
