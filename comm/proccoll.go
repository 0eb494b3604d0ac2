package comm

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// exchange runs one collective: this rank sends f and send; rank 0 reads
// every rank's part in rank order, checks that they agree, computes each
// rank's reply with combine (ins[r] is rank r's send) and sends it; every
// rank's reply lands in recv.
func (pc *ProcComm) exchange(f frame, send, recv []float32, combine func(ins [][]float32) [][]float32) error {
	if err := pc.broken(); err != nil {
		return fmt.Errorf("parallel: %s on rank %d: %w", f.kind, pc.env.Rank, err)
	}
	var err error
	if pc.env.Rank == 0 {
		err = pc.lead(f, send, recv, combine)
	} else {
		err = pc.follow(f, send, recv)
	}
	if err != nil {
		return fmt.Errorf("parallel: %s on rank %d: %w", f.kind, pc.env.Rank, err)
	}
	return nil
}

func (pc *ProcComm) lead(f frame, send, recv []float32, combine func([][]float32) [][]float32) error {
	w := pc.env.WorldSize
	ins := make([][]float32, w)
	ins[0] = send
	for r := 1; r < w; r++ {
		p := pc.peers[r]
		p.c.SetReadDeadline(time.Now().Add(CollectiveTimeout))
		pf, b, err := readFrame(p.c, uint64(4*len(send)))
		switch {
		case err == nil && pf.kind == kAbort:
			return pc.fail(string(b))
		case err != nil && pf.kind != 0 && pf != f:
			err = nil // the mismatch below says more than the refused payload
		case err != nil && pc.broken() != nil: // the heartbeat watch broke the world first
			return pc.broken()
		case err != nil:
			return pc.fail(fmt.Sprintf("%s was lost during %s: %v", p.name(), f.kind, err))
		}
		if msg := mismatch(r, pf, f); msg != "" {
			return pc.fail(msg)
		}
		ins[r] = make([]float32, len(send))
		bytesFloats(ins[r], b)
	}
	outs := combine(ins)
	for r := 1; r < w; r++ {
		p := pc.peers[r]
		p.wmu.Lock()
		p.c.SetWriteDeadline(time.Now().Add(CollectiveTimeout))
		err := writeReply(p.c, 0, floatBytes(outs[r]))
		p.wmu.Unlock()
		if err != nil {
			return pc.fail(fmt.Sprintf("%s was lost during %s: %v", pc.peers[r].name(), f.kind, err))
		}
	}
	if recv != nil {
		copy(recv, outs[0])
	}
	return nil
}

// mismatch says how rank r's call differs from rank 0's ("" when it agrees).
func mismatch(r int, got, want frame) string {
	switch {
	case got.kind != want.kind:
		return fmt.Sprintf("rank %d called %s while rank 0 called %s", r, got.kind, want.kind)
	case got.n != want.n:
		return fmt.Sprintf("rank %d passed %d elements, rank 0 passed %d", r, got.n, want.n)
	case got.op != want.op:
		return fmt.Sprintf("rank %d used op %s, rank 0 used %s", r, got.op, want.op)
	case got.root != want.root:
		return fmt.Sprintf("rank %d used root %d, rank 0 used root %d", r, int32(got.root), int32(want.root))
	}
	return ""
}

// fail breaks the world with msg (sent to every peer) and returns it.
func (pc *ProcComm) fail(msg string) error {
	pc.breakWorld(fmt.Errorf("%w: %s", ErrAborted, msg), msg)
	return fmt.Errorf("%w: %s", ErrAborted, msg)
}

func (pc *ProcComm) follow(f frame, send, recv []float32) error {
	p := pc.peers[0]
	p.wmu.Lock()
	p.c.SetWriteDeadline(time.Now().Add(CollectiveTimeout))
	err := writeFrame(p.c, f, floatBytes(send))
	p.wmu.Unlock()
	if err != nil {
		return pc.lost(f, err)
	}
	p.c.SetReadDeadline(time.Now().Add(CollectiveTimeout))
	status, b, err := readReply(p.c)
	if err != nil {
		return pc.lost(f, err)
	}
	if status != 0 {
		pc.breakWorld(fmt.Errorf("%w: %s", ErrAborted, b), "")
		return fmt.Errorf("%w: %s", ErrAborted, b)
	}
	if len(b) != 4*len(recv) {
		return pc.fail(fmt.Sprintf("rank 0 sent %d bytes for %s, want %d", len(b), f.kind, 4*len(recv)))
	}
	bytesFloats(recv, b)
	return nil
}

// lost reports rank 0's connection ending (or this rank's own abort).
func (pc *ProcComm) lost(f frame, err error) error {
	if b := pc.broken(); b != nil {
		return b
	}
	msg := fmt.Sprintf("rank 0 (%s) was lost during %s: %v", pc.peers[0].host, f.kind, err)
	pc.breakWorld(fmt.Errorf("%w: %s", ErrAborted, msg), "")
	return fmt.Errorf("%w: %s", ErrAborted, msg)
}

func (pc *ProcComm) AllReduce(buf []float32, op Op) error {
	if bad := opCheck(op); bad != "" {
		return pc.badArgs(kAllReduce, bad)
	}
	return pc.exchange(frame{kind: kAllReduce, op: op, n: uint64(len(buf))}, buf, buf, func(ins [][]float32) [][]float32 {
		res := make([]float32, len(buf))
		reduceInto(res, ins, op)
		return same(res, len(ins))
	})
}

func (pc *ProcComm) ReduceScatter(dst, src []float32, op Op) error {
	w, n := pc.env.WorldSize, len(dst)
	if bad := opCheck(op); bad != "" {
		return pc.badArgs(kReduceScatter, bad)
	}
	if len(src) != w*n {
		return pc.badArgs(kReduceScatter, fmt.Sprintf("ReduceScatter src has %d elements, want world size %d x len(dst) %d = %d", len(src), w, n, w*n))
	}
	return pc.exchange(frame{kind: kReduceScatter, op: op, n: uint64(n)}, src, dst, func(ins [][]float32) [][]float32 {
		res := make([]float32, w*n)
		reduceInto(res, ins, op)
		outs := make([][]float32, w)
		for r := range outs {
			outs[r] = res[r*n : r*n+n]
		}
		return outs
	})
}

func (pc *ProcComm) AllGather(dst, src []float32) error {
	w, n := pc.env.WorldSize, len(src)
	if len(dst) != w*n {
		return pc.badArgs(kAllGather, fmt.Sprintf("AllGather dst has %d elements, want world size %d x len(src) %d = %d", len(dst), w, n, w*n))
	}
	send := append([]float32(nil), src...) // src may be block Rank() of dst
	return pc.exchange(frame{kind: kAllGather, n: uint64(n)}, send, dst, func(ins [][]float32) [][]float32 {
		res := make([]float32, 0, w*n)
		for _, in := range ins {
			res = append(res, in...)
		}
		return same(res, w)
	})
}

func (pc *ProcComm) Broadcast(buf []float32, root int) error {
	if root < 0 || root >= pc.env.WorldSize {
		return pc.badArgs(kBroadcast, fmt.Sprintf("Broadcast root %d outside [0,%d)", root, pc.env.WorldSize))
	}
	return pc.exchange(frame{kind: kBroadcast, root: uint32(root), n: uint64(len(buf))}, buf, buf, func(ins [][]float32) [][]float32 {
		return same(append([]float32(nil), ins[root]...), len(ins))
	})
}

func (pc *ProcComm) Barrier() error {
	return pc.exchange(frame{kind: kBarrier}, nil, nil, func(ins [][]float32) [][]float32 {
		return make([][]float32, len(ins))
	})
}

// badArgs fails a call with bad arguments on every rank: the peers'
// collective ends with this rank's complaint.
func (pc *ProcComm) badArgs(k kind, msg string) error {
	err := errors.New(msg)
	pc.Abort(fmt.Errorf("%s: %w", k, err))
	return fmt.Errorf("parallel: %s: %w", k, err)
}

func same(v []float32, w int) [][]float32 {
	outs := make([][]float32, w)
	for r := range outs {
		outs[r] = v
	}
	return outs
}

// agree is CheckedComm's host half across processes: the call's kind,
// length, op and root checked on rank 0, no data (dtypes are not compared).
func (pc *ProcComm) agree(cl call) error {
	if cl.bad != "" {
		return pc.badArgs(cl.kind, cl.bad)
	}
	return pc.exchange(cl.frame(), nil, nil, func(ins [][]float32) [][]float32 { return make([][]float32, len(ins)) })
}

// ShareBytes returns rank 0's b (at most 1 MiB) on every rank: the NCCL
// unique id. It goes through the store (key share/N for the N-th call);
// the other ranks wait for it up to the join timeout, and fail at once if
// rank 0's store goes away.
func (pc *ProcComm) ShareBytes(b []byte) ([]byte, error) {
	key := "share/" + strconv.Itoa(pc.shares)
	pc.shares++
	if pc.env.Rank == 0 {
		if err := pc.store.Set(key, b, pc.env.joinTimeout()); err != nil {
			return nil, fmt.Errorf("parallel: rank 0 sharing %d bytes: %w", len(b), err)
		}
		return append([]byte(nil), b...), nil
	}
	got, err := pc.store.Get(key, pc.env.joinTimeout())
	if err != nil {
		return nil, fmt.Errorf("parallel: rank %d waiting for rank 0 (host %s) to share %s: %w", pc.env.Rank, pc.peers[0].host, key, err)
	}
	return got, nil
}

// LocalRank and LocalWorldSize place this process on its host (the GPU it
// uses, its share of the cores); LocalWorldSize is 1 when the launcher did
// not say.
func (pc *ProcComm) LocalRank() int { return pc.env.LocalRank }

func (pc *ProcComm) LocalWorldSize() int { return max(1, pc.env.LocalWorldSize) }
