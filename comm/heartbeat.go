package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// Heartbeats find the peers that stop without closing their connections
// (a process stopped or hung in the kernel, a host cut off): a killed
// process closes its sockets, and its peers' collectives fail at once, but
// a stopped one would leave them waiting CollectiveTimeout. Every rank
// other than 0 adds to its counter hb/R in the store every interval, on a
// connection of its own; rank 0 reads, from its own server's clock, when
// each counter last moved. A rank silent for the peer timeout breaks the
// world on rank 0 (which tells the others, naming it); a rank whose
// heartbeat rank 0 does not answer within the timeout breaks it on its
// side, naming rank 0. Heartbeats come from goroutines of their own, so a
// rank busy computing (or writing a checkpoint) still sends them.

func hbKey(r int) string   { return "hb/" + strconv.Itoa(r) }
func leftKey(r int) string { return "left/" + strconv.Itoa(r) }

// interval is how often a rank beats: a fifth of the timeout, 50 ms..2 s.
func interval(timeout time.Duration) time.Duration {
	return min(max(timeout/5, 50*time.Millisecond), 2*time.Second)
}

func (pc *ProcComm) startHeartbeats() {
	if pc.env.WorldSize == 1 {
		return
	}
	timeout := pc.env.peerTimeout()
	if pc.env.Rank == 0 {
		go pc.watch(timeout)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	hb, err := DialStore(ctx, pc.store.addr)
	if err != nil {
		pc.fail(fmt.Sprintf("rank %d (host %s) cannot open its heartbeat connection to rank 0 (host %s): %v",
			pc.env.Rank, pc.host, pc.peers[0].host, err))
		return
	}
	pc.mu.Lock()
	pc.hb = hb
	pc.mu.Unlock()
	go pc.beat(hb, timeout)
}

// beat is a rank's heartbeat until the world ends.
func (pc *ProcComm) beat(hb *StoreClient, timeout time.Duration) {
	t := time.NewTicker(interval(timeout))
	defer t.Stop()
	for {
		if _, err := hb.Add(hbKey(pc.env.Rank), 1, timeout); err != nil {
			// Only silence is the heartbeat's to report: a closed
			// connection (rank 0 ended or was killed) ends the
			// collectives with rank 0's own word, or with an EOF there.
			var ne net.Error
			if pc.broken() == nil && errors.As(err, &ne) && ne.Timeout() {
				msg := fmt.Sprintf("rank 0 (host %s) did not answer rank %d's heartbeat within %v: %v",
					pc.peers[0].host, pc.env.Rank, timeout, err)
				pc.breakWorld(fmt.Errorf("%w: %s", ErrAborted, msg), msg)
			}
			return
		}
		select {
		case <-pc.done:
			return
		case <-t.C:
		}
	}
}

// watch is rank 0's check of every rank's heartbeat until the world ends.
func (pc *ProcComm) watch(timeout time.Duration) {
	start := time.Now()
	t := time.NewTicker(interval(timeout))
	defer t.Stop()
	for {
		select {
		case <-pc.done:
			return
		case <-t.C:
		}
		for _, p := range pc.peers[1:] {
			last := pc.server.Touched(hbKey(p.rank))
			if last.IsZero() {
				last = start
			}
			if quiet := time.Since(last); quiet > timeout && pc.server.Touched(leftKey(p.rank)).IsZero() {
				pc.fail(fmt.Sprintf("%s sent no heartbeat for %v (stopped, hung or cut off; the limit is %v)",
					p.name(), quiet.Round(100*time.Millisecond), timeout))
				return
			}
		}
	}
}
