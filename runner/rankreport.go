package runner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"resnetlab/report"
)

// In a world of processes only rank 0 has a front end, so the other ranks
// report to it what its front end shows of a rank: the memory accounting
// (MemoryUsage), the position, the run's peaks so far and, for Gemini, the
// last step's memory statistics and their totals, its chunk moves and its
// latest chunk snapshot (chunkreport.go). Each rank encodes a
// rankRecord whenever it publishes its memory (about once a second and at
// every epoch's end) and hands it to ProcComm.Report, which sends the
// latest one from a goroutine of its own; rank 0 reads the records from
// its store at most every reportPoll and emits them as events of their
// ranks. At the end of a run every rank flushes its last record before a
// barrier, so rank 0's result holds every rank's final peaks.

// rankRecord is one report's head on the wire: fixed size, little-endian,
// every field a fixed-size number (binary.Size), followed by NumChunks
// chunkRecords. Rank 0 refuses a record of another size, version or rank,
// or with impossible values.
type rankRecord struct {
	Magic        [4]byte
	Version      uint32
	Seq          uint64 // the rank's reports so far: rank 0 forwards each once
	Rank         int64
	Epoch, Step  int64 // epochs done and steps into the next when measured
	Device, Host [6]int64
	DevicePeak   int64
	HostPeak     int64
	HostPageable int64
	HostPinned   int64
	Budget       int64
	Capacity     int64
	DeviceIsHost uint8
	HasGemini    uint8
	PeakDevice   int64 // the run's peaks so far: the result's per-rank fields
	PeakHost     int64
	Gem          gemRecord   // the last step's Gemini statistics
	GemTotal     gemRecord   // and their totals (Evict: seconds, Step: steps)
	Moves        moveRecord  // Gemini's chunk moves since the run started
	ChunkStep    int64       // the latest chunk snapshot's step
	ChunkOp      [opLen]byte // and operator (NUL-padded, empty at rest)
	NumChunks    uint32      // its chunks, the chunkRecords that follow
}

type gemRecord struct {
	Step                         int64
	H2D, D2H, Evictions          int64
	EvictNanos                   int64
	PeakDevice, HostIn, HostPeak int64
	NonModelPeak                 int64
	WastePct                     float64
}

var recordMagic = [4]byte{'r', 'l', 'r', 'r'}

// recordVersion 2 added the chunk moves and snapshot.
const recordVersion = 2

// recordSize is a record head's length on the wire.
var recordSize = binary.Size(rankRecord{})

// reportPoll bounds how often rank 0 looks for new records.
const reportPoll = 100 * time.Millisecond

// flushTimeout bounds a rank's last report at the end of a run.
const flushTimeout = 5 * time.Second

// maxBytes is more memory than any rank holds: a larger count is corrupt.
const maxBytes = 1 << 50

// remoteRanks is rank 0's view of the other ranks' reports.
type remoteRanks struct {
	seq     []uint64    // per rank, the last record forwarded
	refused []bool      // per rank, whether a refusal was logged (once)
	gem     []gemRecord // per rank, the last Gemini totals (for the result)
	moves   []ChunkMoves
	polled  time.Time
}

// reportMemory sends this rank's memory event to rank 0 (ranks >= 1).
func (j *job) reportMemory(ev MemoryUsage) {
	j.reportSeq++
	rec := rankRecord{Magic: recordMagic, Version: recordVersion, Seq: j.reportSeq, Rank: int64(ev.Rank),
		Epoch: int64(j.epoch), Step: int64(j.step), Device: ev.Device, Host: ev.Host,
		DevicePeak: ev.DevicePeak, HostPeak: ev.HostPeak, HostPageable: ev.HostPageable, HostPinned: ev.HostPinned,
		Budget: ev.Budget, Capacity: ev.Capacity,
		PeakDevice: j.result.PeakDeviceBytes[ev.Rank], PeakHost: j.result.PeakHostBytes[ev.Rank]}
	if ev.DeviceIsHost {
		rec.DeviceIsHost = 1
	}
	if g := j.gem[0]; g.total.Steps > 0 {
		rec.HasGemini = 1
		rec.Gem = g.last
		t := g.total
		rec.GemTotal = gemRecord{Step: int64(t.Steps), H2D: t.H2DBytes, D2H: t.D2HBytes, Evictions: int64(t.Evictions),
			EvictNanos: int64(t.EvictSeconds * 1e9), PeakDevice: t.PeakDeviceBytes, HostPeak: t.PeakHostTierBytes,
			NonModelPeak: t.NonModelPeakBytes, WastePct: t.ChunkWastePct}
	}
	chunks := encodeChunks(&rec, &j.gem[0])
	b, _ := binary.Append(nil, binary.LittleEndian, &rec) // fixed-size fields: cannot fail
	b, _ = binary.Append(b, binary.LittleEndian, chunks)
	if err := j.world.Report(b); err != nil {
		j.logf(LevelWarn, "%v", err)
	}
}

// collectReports forwards the records that arrived since the last look
// (rank 0 of a world; at most every reportPoll unless final).
func (j *job) collectReports(final bool) {
	if j.world == nil || j.world.Rank() != 0 || (!final && time.Since(j.remote.polled) < reportPoll) {
		return
	}
	j.remote.polled = time.Now()
	w := j.world.WorldSize()
	if len(j.remote.seq) != w {
		j.remote = remoteRanks{seq: make([]uint64, w), refused: make([]bool, w), gem: make([]gemRecord, w),
			moves: make([]ChunkMoves, w), polled: j.remote.polled}
	}
	for r := 1; r < w; r++ {
		b, err := j.world.Reported(r)
		if b == nil && err == nil {
			continue
		}
		var rec rankRecord
		var chunks []ChunkState
		if err == nil {
			rec, chunks, err = j.decodeRecord(r, b)
		}
		if err != nil {
			j.refuseReport(r, err)
			continue
		}
		if rec.Seq > j.remote.seq[r] {
			j.remote.seq[r] = rec.Seq
			j.applyRecord(r, rec)
			j.applyChunks(r, rec, chunks)
		}
	}
}

// refuseReport says once per rank why its reports are ignored.
func (j *job) refuseReport(r int, err error) {
	if !j.remote.refused[r] {
		j.remote.refused[r] = true
		j.logf(LevelWarn, "ignoring rank %d's memory reports: %v", r, err)
	}
}

// decodeRecord reads rank r's record b and its chunks and checks them:
// the head first, so that its chunk count is trusted only once the head
// is known to be a record of this run's.
func (j *job) decodeRecord(r int, b []byte) (rankRecord, []ChunkState, error) {
	var rec rankRecord
	if len(b) < recordSize {
		return rec, nil, fmt.Errorf("rank %d sent a report of %d bytes, want at least %d", r, len(b), recordSize)
	}
	if _, err := binary.Decode(b[:recordSize], binary.LittleEndian, &rec); err != nil {
		return rec, nil, fmt.Errorf("rank %d sent an unreadable report: %v", r, err)
	}
	if err := j.checkRecord(r, &rec); err != nil {
		return rec, nil, fmt.Errorf("rank %d sent a bad report: %v", r, err)
	}
	chunks, err := j.decodeChunks(&rec, b[recordSize:])
	if err != nil {
		return rec, nil, fmt.Errorf("rank %d sent a bad report: %v", r, err)
	}
	return rec, chunks, nil
}

// checkRecord refuses a record that no rank of this run could have sent.
func (j *job) checkRecord(r int, rec *rankRecord) error {
	switch {
	case rec.Magic != recordMagic || rec.Version != recordVersion:
		return fmt.Errorf("not a version %d record", recordVersion)
	case rec.Rank != int64(r):
		return fmt.Errorf("it says it is rank %d", rec.Rank)
	case rec.Epoch < 0 || rec.Epoch > int64(j.spec.Epochs) || rec.Step < 0 || rec.Step > int64(j.info.StepsPerEpoch):
		return fmt.Errorf("position epoch %d step %d is outside the run's %d x %d", rec.Epoch, rec.Step, j.spec.Epochs, j.info.StepsPerEpoch)
	}
	counts := append(rec.Device[:], rec.Host[:]...)
	counts = append(counts, rec.DevicePeak, rec.HostPeak, rec.HostPageable, rec.HostPinned, rec.Budget, rec.Capacity,
		rec.PeakDevice, rec.PeakHost)
	m := rec.Moves
	counts = append(counts, m.ToDevice, m.ToHost, m.Clean, m.Prefetched, m.H2D, m.D2H)
	for _, g := range []gemRecord{rec.Gem, rec.GemTotal} {
		counts = append(counts, g.Step, g.H2D, g.D2H, g.Evictions, g.EvictNanos, g.PeakDevice, g.HostIn, g.HostPeak, g.NonModelPeak)
		if !(g.WastePct >= 0 && g.WastePct <= 100) { // NaN fails too
			return fmt.Errorf("chunk waste %v%%", g.WastePct)
		}
	}
	for _, n := range counts {
		if n < 0 || n > maxBytes {
			return errors.New("a count outside [0, 2^50]")
		}
	}
	return j.checkChunkHeader(rec)
}

// applyRecord emits rank r's record as its events and keeps its peaks.
func (j *job) applyRecord(r int, rec rankRecord) {
	j.emit(MemoryUsage{Run: j.info.ID, Rank: r, Epoch: int(rec.Epoch), Step: int(rec.Step), Device: rec.Device, Host: rec.Host,
		DevicePeak: rec.DevicePeak, HostPeak: rec.HostPeak, HostPageable: rec.HostPageable, HostPinned: rec.HostPinned,
		DeviceIsHost: rec.DeviceIsHost != 0, Budget: rec.Budget, Capacity: rec.Capacity})
	res := j.result
	res.PeakDeviceBytes[r] = max(res.PeakDeviceBytes[r], rec.PeakDevice)
	res.PeakHostBytes[r] = max(res.PeakHostBytes[r], rec.PeakHost)
	if rec.HasGemini == 0 {
		return
	}
	g := rec.Gem
	j.emit(GeminiStep{Run: j.info.ID, Rank: r, Step: int(g.Step), H2DBytes: g.H2D, D2HBytes: g.D2H,
		Evictions: int(g.Evictions), EvictTime: time.Duration(g.EvictNanos), PeakDevice: g.PeakDevice,
		HostInUse: g.HostIn, HostPeak: g.HostPeak, NonModelPeak: g.NonModelPeak, WastePct: g.WastePct})
	j.remote.gem[r] = rec.GemTotal
}

// remoteGemini is rank r's Gemini totals as its last record gave them.
func (j *job) remoteGemini(r int) (report.GeminiMemStats, bool) {
	if r >= len(j.remote.gem) || j.remote.gem[r].Step == 0 {
		return report.GeminiMemStats{}, false
	}
	g, m := j.remote.gem[r], j.remote.moves[r]
	return report.GeminiMemStats{Rank: r, Steps: int(g.Step), H2DBytes: g.H2D, D2HBytes: g.D2H,
		EvalH2DBytes: m.EvalH2D, EvalD2HBytes: m.EvalD2H, Evictions: int(g.Evictions),
		EvictSeconds: float64(g.EvictNanos) / 1e9, PeakDeviceBytes: g.PeakDevice, PeakHostTierBytes: g.HostPeak,
		NonModelPeakBytes: g.NonModelPeak, ChunkWastePct: g.WastePct}, true
}

// syncReports makes rank 0's record of the other ranks final: each sends
// its last record and then enters a barrier, which rank 0 leaves only
// once every record is in its store. Every rank calls it at the same
// point (the run's end, or an interruption all ranks agreed on); in a
// broken world the barrier fails at once and rank 0 keeps what it has.
func (j *job) syncReports() {
	if j.world == nil || j.world.WorldSize() == 1 {
		return
	}
	j.publishMemory()
	if j.world.Rank() != 0 {
		if err := j.world.FlushReport(flushTimeout); err != nil {
			j.logf(LevelWarn, "%v", err)
		}
	}
	if j.world.Barrier() == nil {
		j.collectReports(true)
		j.geminiResult()
	}
}
