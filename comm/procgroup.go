package comm

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"time"
	"unsafe"
)

// ProcComm is one process's Communicator in a world of processes (one rank
// each) joined by JoinWorld. The ranks form a star around rank 0: every
// collective sends each rank's buffer to rank 0, which reduces in rank
// order with reduceInto (the in-process Group's order, so the bits are the
// same) and sends every rank its part. A peer that fails, exits or is
// killed ends every other rank's collective with an error naming it.
type ProcComm struct {
	env    Env
	host   string
	peers  []*peer      // rank 0: peers[r] for r >= 1; other ranks: peers[0] is rank 0
	server *StoreServer // rank 0's
	store  *StoreClient
	hb     *StoreClient // heartbeats (ranks >= 1), beside store's long waits
	shares int          // ShareBytes calls so far: the key of the next
	rep    *reporter    // this rank's report sender (report.go), started by the first Report
	mu     sync.Mutex
	err    error         // set once the world is broken; every later call returns it
	done   chan struct{} // closed when the world breaks or closes: stops the heartbeats
	start  time.Time     // when JoinWorld began: the rendezvous's errors say how long it waited
}

type peer struct {
	rank int
	host string
	c    net.Conn
	wmu  sync.Mutex // Abort may write while a collective writes
}

func (p *peer) name() string { return fmt.Sprintf("rank %d (host %s)", p.rank, p.host) }

// CollectiveTimeout bounds how long a rank waits in one collective for its
// peers (a stopped, not killed, peer). A killed peer's connection closes at
// once and ends the collective then.
var CollectiveTimeout = 10 * time.Minute

var pgMagic = [4]byte{'r', 'l', 'p', 'g'}

// maxFingerprint bounds a hello's host and fingerprint fields.
const maxFingerprint = 4096

func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// readReply reads a status byte, a length and that many bytes.
func readReply(c net.Conn) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > 1<<31 {
		return 0, nil, fmt.Errorf("announced %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, nil, err
	}
	return head[0], b, nil
}

func (pc *ProcComm) Rank() int      { return pc.env.Rank }
func (pc *ProcComm) WorldSize() int { return pc.env.WorldSize }

// Launcher is the `resnetlab launch` command line that started the world
// (Env.Launch), "" when another launcher did.
func (pc *ProcComm) Launcher() string { return pc.env.Launch }

// Abort breaks the world: rank 0 tells every peer cause, another rank
// tells rank 0 (which tells the rest), and every connection closes, so
// every pending and future collective fails with ErrAborted.
func (pc *ProcComm) Abort(cause error) {
	msg := fmt.Sprintf("rank %d (host %s) failed: %v", pc.env.Rank, pc.host, cause)
	pc.breakWorld(fmt.Errorf("%w: %s", ErrAborted, msg), msg)
}

// Close leaves the world; peers still in a collective see the connection
// close.
func (pc *ProcComm) Close() error {
	if pc.hb != nil && pc.broken() == nil { // a rank that ends is not a lost one
		pc.hb.Set(leftKey(pc.env.Rank), nil, time.Second)
	}
	pc.breakWorld(fmt.Errorf("%w: the communicator was closed", ErrAborted), "")
	return nil
}

func (pc *ProcComm) breakWorld(err error, msg string) {
	pc.mu.Lock()
	first := pc.err == nil
	if first {
		pc.err = err
	}
	pc.mu.Unlock()
	if !first {
		return
	}
	for _, p := range pc.peers {
		if p == nil || p.c == nil {
			continue
		}
		if msg != "" {
			p.wmu.Lock()
			p.c.SetWriteDeadline(time.Now().Add(time.Second))
			if pc.env.Rank == 0 {
				writeReply(p.c, 1, []byte(msg))
			} else {
				writeFrame(p.c, frame{kind: kAbort}, []byte(msg))
			}
			p.wmu.Unlock()
		}
	}
	pc.close()
}

// close drops every connection of this rank: the collectives', the
// store's (rank 0: the store itself) and the heartbeats'.
func (pc *ProcComm) close() {
	pc.mu.Lock()
	if pc.done != nil {
		select {
		case <-pc.done:
		default:
			close(pc.done)
		}
	}
	pc.mu.Unlock()
	for _, p := range pc.peers {
		if p != nil && p.c != nil {
			p.c.Close()
		}
	}
	for _, c := range []*StoreClient{pc.hb, pc.store} {
		if c != nil {
			c.Close()
		}
	}
	if pc.server != nil {
		pc.server.Close()
	}
}

func (pc *ProcComm) broken() error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.err
}

// kAbort is a frame a failing rank sends rank 0 instead of a collective.
const kAbort kind = 100

// frame heads one rank's part of a collective on the wire.
type frame struct {
	kind kind
	op   Op
	root uint32
	n    uint64 // the per-rank length that must agree (as call.n)
}

const frameLen = 1 + 1 + 4 + 8 + 8

func writeFrame(c net.Conn, f frame, payload []byte) error {
	b := make([]byte, frameLen)
	b[0], b[1] = byte(f.kind), byte(f.op)
	binary.BigEndian.PutUint32(b[2:], f.root)
	binary.BigEndian.PutUint64(b[6:], f.n)
	binary.BigEndian.PutUint64(b[14:], uint64(len(payload)))
	bufs := net.Buffers{b, payload} // one writev, no copy of the payload
	_, err := bufs.WriteTo(c)
	return err
}

// readFrame reads a frame and its payload, refusing one larger than
// maxPayload (what the reader's own call justifies).
func readFrame(c net.Conn, maxPayload uint64) (frame, []byte, error) {
	var b [frameLen]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return frame{}, nil, err
	}
	f := frame{kind: kind(b[0]), op: Op(b[1]), root: binary.BigEndian.Uint32(b[2:]), n: binary.BigEndian.Uint64(b[6:])}
	n := binary.BigEndian.Uint64(b[14:])
	if f.kind == kAbort {
		maxPayload = 1 << 16
	}
	if n > maxPayload {
		return f, nil, fmt.Errorf("announced a payload of %d bytes, want at most %d", n, maxPayload)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c, p); err != nil {
		return f, nil, err
	}
	return f, p, nil
}

// littleEndian: the wire order of the float32s is the host's on
// little-endian machines (every machine resnetlab runs on), so buffers go
// to the socket as they are, without a conversion pass.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// floatBytes is v as little-endian bytes: v's own memory where the host
// is little-endian (the caller must not change v while the bytes are in use).
func floatBytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// bytesFloats fills dst from little-endian bytes b (4*len(dst) of them).
func bytesFloats(dst []float32, b []byte) {
	if littleEndian {
		copy(floatBytes(dst), b)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}
