package comm

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Rank reports carry what the ranks other than 0 know of themselves (the
// runner's memory accounting, position and Gemini chunk strip) to rank 0,
// which alone has a front end. Each rank keeps its latest record under
// report/R in the world's store; rank 0 reads it from its own server,
// without a round trip. The records go out from a goroutine of their own, at most one per
// reportGap and the latest only, so a rank never waits on the network to
// report and never floods rank 0; FlushReport writes the latest at once,
// for the numbers a result must hold. The bytes are the caller's: comm
// only bounds their size (MaxReport).

// MaxReport bounds one rank report: what a rank may make rank 0 read.
// The runner's record with a Gemini chunk snapshot of ResNet-18 (at most
// 62 chunks, one per parameter) takes under 2 KiB.
const MaxReport = 4096

// reportGap is the least time between two reports of one rank.
var reportGap = 250 * time.Millisecond

func reportKey(r int) string { return "report/" + strconv.Itoa(r) }

// reporter is a rank's sender of reports (ranks >= 1).
type reporter struct {
	pc      *ProcComm
	mu      sync.Mutex
	pending []byte // the latest record not yet sent (nil: none)
	kick    chan struct{}
	sendMu  sync.Mutex // held while a record goes out: FlushReport's write is the last
}

// Report hands rank rank's latest record b to the sender and returns at
// once (rank 0 keeps its own records: Report does nothing there, nor in a
// world of one). b must not exceed MaxReport.
func (pc *ProcComm) Report(b []byte) error {
	if len(b) > MaxReport {
		return fmt.Errorf("parallel: rank %d report of %d bytes, want at most %d", pc.env.Rank, len(b), MaxReport)
	}
	rp := pc.reporter()
	if rp == nil {
		return nil
	}
	rp.mu.Lock()
	rp.pending = append(rp.pending[:0], b...)
	rp.mu.Unlock()
	select {
	case rp.kick <- struct{}{}:
	default: // a kick is already waiting: it sends the latest record
	}
	return nil
}

// FlushReport writes the latest record handed to Report into the store
// before it returns (within timeout), so that rank 0, once it has passed
// a collective this rank entered after the flush, reads it.
func (pc *ProcComm) FlushReport(timeout time.Duration) error {
	rp := pc.reporter()
	if rp == nil {
		return nil
	}
	return rp.send(timeout)
}

// reporter returns the rank's sender, starting it on the first call (nil
// on rank 0 and in a world of one).
func (pc *ProcComm) reporter() *reporter {
	if pc.env.Rank == 0 || pc.env.WorldSize == 1 {
		return nil
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.rep == nil {
		pc.rep = &reporter{pc: pc, kick: make(chan struct{}, 1)}
		go pc.rep.loop()
	}
	return pc.rep
}

// loop sends the latest record after each kick, at most one per
// reportGap, until the world ends.
func (rp *reporter) loop() {
	for {
		select {
		case <-rp.pc.done:
			return
		case <-rp.kick:
		}
		if err := rp.send(rp.pc.env.peerTimeout()); err != nil {
			return // the world is broken or closing: the collectives say why
		}
		select {
		case <-rp.pc.done:
			return
		case <-time.After(reportGap):
		}
	}
}

// send writes the pending record, if any.
func (rp *reporter) send(timeout time.Duration) error {
	rp.sendMu.Lock()
	defer rp.sendMu.Unlock()
	rp.mu.Lock()
	b := rp.pending
	rp.pending = nil
	rp.mu.Unlock()
	if b == nil {
		return nil
	}
	pc := rp.pc
	if err := pc.broken(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := pc.store.Set(reportKey(pc.env.Rank), b, left(ctx)); err != nil {
		return fmt.Errorf("parallel: rank %d reporting to rank 0: %w", pc.env.Rank, err)
	}
	return nil
}

// Reported is rank r's latest report (nil when it has sent none yet), read
// by rank 0 from its own store. A record over MaxReport is refused
// unread, with an error naming the rank.
func (pc *ProcComm) Reported(r int) ([]byte, error) {
	if pc.server == nil || r < 1 || r >= pc.env.WorldSize {
		return nil, fmt.Errorf("parallel: rank %d cannot read rank %d's report (only rank 0 reads the others')", pc.env.Rank, r)
	}
	return pc.server.valueUpTo(reportKey(r), MaxReport, func(n int) error {
		return fmt.Errorf("rank %d sent a report of %d bytes, want at most %d", r, n, MaxReport)
	})
}

// valueUpTo copies key's value (nil when unset), refusing one longer than
// limit with tooLong's error, without copying it.
func (s *StoreServer) valueUpTo(key string, limit int, tooLong func(n int) error) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vals[key]
	switch {
	case !ok:
		return nil, nil
	case len(v) > limit:
		return nil, tooLong(len(v))
	}
	return append([]byte{}, v...), nil
}
