package runner

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"resnetlab/comm"
	"resnetlab/spec"
)

// A rank's report (rankreport.go) also carries what rank 0's chunk strip
// shows of it: its chunk moves since the run started (moveRecord) and its
// latest chunk snapshot, one chunkRecord per chunk after the rankRecord.
// Every rank packs the same parameters into the same chunks, so rank 0
// takes a snapshot only with as many chunks as its own engine has, each
// with the tensor count and bytes of its own chunk of that index: the
// model bounds a report's size, and a strip rank 0 shows is one its own
// run could have shown.

// moveRecord is ChunkMoves on the wire.
type moveRecord struct {
	ToDevice, ToHost, Clean, Prefetched int64
	H2D, D2H                            int64
}

// chunkRecord is one ChunkState on the wire. OnDevice is not sent: it is
// Params == "device" (geminiChunks).
type chunkRecord struct {
	ID     uint32
	Params uint8 // index into placeNames
	Optim  uint8
	States [5]uint16 // a chunk holds at most the model's 62 tensors
	Bytes  int64
}

// opLen bounds a snapshot's operator name on the wire (the longest,
// "post-bwd layer4.1.downsample.1", has 30 bytes); it is NUL-padded.
const opLen = 48

var chunkRecordSize = binary.Size(chunkRecord{})

// placeNames are ChunkState's Params and Optim values, by wire code.
var placeNames = [...]string{"nowhere", "device", "host"}

// placeCode is s's wire code; an unknown place gets one rank 0 refuses.
func placeCode(s string) uint8 {
	for i, n := range placeNames {
		if n == s {
			return uint8(i)
		}
	}
	return 0xff
}

// encodeChunks puts rank g's moves and latest snapshot into rec and
// returns the chunk records that follow it on the wire. A snapshot that
// would take the report over comm.MaxReport stays behind, so that the
// memory still goes.
func encodeChunks(rec *rankRecord, g *geminiRank) []chunkRecord {
	m := g.moves
	rec.Moves = moveRecord{ToDevice: int64(m.ToDevice), ToHost: int64(m.ToHost), Clean: int64(m.Clean),
		Prefetched: int64(m.Prefetched), H2D: m.H2DBytes, D2H: m.D2HBytes}
	snap := g.snap.Chunks
	if recordSize+len(snap)*chunkRecordSize > comm.MaxReport {
		snap = nil
	}
	rec.ChunkStep = int64(g.snap.Step)
	copy(rec.ChunkOp[:], g.snap.Op) // cut at opLen: the name is only shown
	rec.NumChunks = uint32(len(snap))
	out := make([]chunkRecord, len(snap))
	for i, c := range snap {
		out[i] = chunkRecord{ID: uint32(c.ID), Params: placeCode(c.Params), Optim: placeCode(c.Optim), Bytes: c.Bytes}
		for s, k := range c.States {
			out[i].States[s] = uint16(min(k, 1<<16-1))
		}
	}
	return out
}

// chunkLayout is rank 0's own chunks (its engine's first snapshot): what
// every rank's snapshot must match. Nil when rank 0 has no Gemini engine.
func (j *job) chunkLayout() []ChunkState {
	if g := j.localGem(0); g != nil {
		return g.layout
	}
	return nil
}

// decodeChunks reads the chunk records b that follow rec and checks them
// against rank 0's layout: their number before anything is decoded, so a
// corrupt count costs nothing.
func (j *job) decodeChunks(rec *rankRecord, b []byte) ([]ChunkState, error) {
	layout := j.chunkLayout()
	n := int(rec.NumChunks)
	if n != 0 && n != len(layout) {
		return nil, fmt.Errorf("a snapshot of %d chunks, this run has %d", rec.NumChunks, len(layout))
	}
	if want := n * chunkRecordSize; len(b) != want {
		return nil, fmt.Errorf("%d bytes of chunks, want %d for %d chunks", len(b), want, n)
	}
	recs := make([]chunkRecord, n)
	if _, err := binary.Decode(b, binary.LittleEndian, recs); err != nil {
		return nil, fmt.Errorf("unreadable chunks: %v", err)
	}
	out := make([]ChunkState, n)
	for i, c := range recs {
		var err error
		if out[i], err = chunkOf(c, layout[i]); err != nil {
			return nil, fmt.Errorf("chunk %d: %v", i, err)
		}
	}
	return out, nil
}

// chunkOf is chunk record c, refused unless it can be rank 0's chunk
// want (same index, tensors and bytes) in some state.
func chunkOf(c chunkRecord, want ChunkState) (ChunkState, error) {
	tensors, wantTensors := 0, 0
	for s, k := range c.States {
		tensors += int(k)
		wantTensors += want.States[s]
	}
	switch {
	case int(c.ID) != want.ID:
		return ChunkState{}, fmt.Errorf("it says it is chunk %d", c.ID)
	case int(c.Params) >= len(placeNames) || int(c.Optim) >= len(placeNames):
		return ChunkState{}, fmt.Errorf("place codes %d/%d", c.Params, c.Optim)
	case tensors != wantTensors || c.Bytes != want.Bytes:
		return ChunkState{}, fmt.Errorf("%d tensors of %d bytes, want %d of %d", tensors, c.Bytes, wantTensors, want.Bytes)
	}
	st := ChunkState{ID: int(c.ID), Bytes: c.Bytes, Params: placeNames[c.Params], Optim: placeNames[c.Optim]}
	st.OnDevice = st.Params == "device"
	for s, k := range c.States {
		st.States[s] = int(k)
	}
	return st, nil
}

// checkChunkHeader refuses moves and a snapshot position no rank of this
// run could have sent (the counts' range is checkRecord's).
func (j *job) checkChunkHeader(rec *rankRecord) error {
	m := rec.Moves
	steps := int64(j.spec.Epochs) * int64(j.info.StepsPerEpoch)
	name, pad, _ := bytes.Cut(rec.ChunkOp[:], []byte{0})
	switch {
	case m.Prefetched > m.ToDevice:
		return fmt.Errorf("%d prefetches of %d uploads", m.Prefetched, m.ToDevice)
	case rec.ChunkStep < 0 || rec.ChunkStep > steps:
		return fmt.Errorf("a chunk snapshot at step %d of the run's %d", rec.ChunkStep, steps)
	case bytes.ContainsFunc(name, func(r rune) bool { return r < ' ' || r > '~' }) || bytes.ContainsFunc(pad, func(r rune) bool { return r != 0 }):
		return fmt.Errorf("an operator name %q", rec.ChunkOp[:])
	}
	return nil
}

// applyChunks emits rank r's strip and moves as its events: the ones an
// in-process rank's events would have given the front end.
func (j *job) applyChunks(r int, rec rankRecord, chunks []ChunkState) {
	if j.cell.Plugin != spec.PluginGemini {
		return
	}
	if len(chunks) > 0 {
		name, _, _ := bytes.Cut(rec.ChunkOp[:], []byte{0})
		j.emit(ChunksUpdate{Run: j.info.ID, Rank: r, Step: int(rec.ChunkStep), Op: string(name), Chunks: chunks})
	}
	m := rec.Moves
	mv := ChunkMoves{Run: j.info.ID, Rank: r, ToDevice: int(m.ToDevice), ToHost: int(m.ToHost), Clean: int(m.Clean),
		Prefetched: int(m.Prefetched), H2DBytes: m.H2D, D2HBytes: m.D2H, EvalH2D: m.H2D, EvalD2H: m.D2H}
	// The record holds the moves and the training steps' totals of one
	// moment between steps: what the steps did not move, the evaluations did.
	if rec.HasGemini != 0 {
		mv.EvalH2D, mv.EvalD2H = max(m.H2D-rec.GemTotal.H2D, 0), max(m.D2H-rec.GemTotal.D2H, 0)
	}
	if r < len(j.remote.moves) {
		j.remote.moves[r] = mv
	}
	j.emit(mv)
}
