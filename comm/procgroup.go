package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
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
	env   Env
	host  string
	peers []*peer // rank 0: peers[r] for r >= 1; other ranks: peers[0] is rank 0
	mu    sync.Mutex
	err   error // set once the world is broken; every later call returns it
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

// JoinWorld joins env's world: rank 0 listens on MASTER_PORT (all
// interfaces, as ExchangeID) and waits for the other WORLD_SIZE-1 ranks;
// they dial MASTER_ADDR:MASTER_PORT. Every rank sends its host name and
// fingerprint (a digest of the spec and binary it runs); rank 0 refuses a
// rank whose fingerprint differs from its own, a duplicate RANK and a
// different WORLD_SIZE, and tells every rank why. It fails when ctx ends,
// or after RendezvousTimeout if ctx has no deadline, naming the ranks that
// never arrived.
func JoinWorld(ctx context.Context, env Env, fingerprint string) (*ProcComm, error) {
	if env.WorldSize < 1 || env.Rank < 0 || env.Rank >= env.WorldSize {
		return nil, fmt.Errorf("rendezvous: rank %d of world size %d", env.Rank, env.WorldSize)
	}
	if len(fingerprint) > maxFingerprint {
		return nil, fmt.Errorf("rendezvous: fingerprint of %d bytes, want at most %d", len(fingerprint), maxFingerprint)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, RendezvousTimeout)
		defer cancel()
	}
	host, _ := os.Hostname()
	pc := &ProcComm{env: env, host: host}
	var err error
	if env.Rank == 0 {
		err = pc.serve(ctx, fingerprint)
	} else {
		err = pc.join(ctx, fingerprint)
	}
	if err != nil {
		pc.close()
		return nil, err
	}
	for _, p := range pc.peers {
		if p == nil {
			continue
		}
		p.c.SetDeadline(time.Time{})
		if tc, ok := p.c.(*net.TCPConn); ok { // a host that vanishes without a FIN
			tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3})
		}
	}
	return pc, nil
}

func (pc *ProcComm) serve(ctx context.Context, fp string) error {
	env := pc.env
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(env.MasterPort)))
	if err != nil {
		return fmt.Errorf("rendezvous: rank 0 cannot listen on MASTER_PORT %d: %w", env.MasterPort, err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	pc.peers = make([]*peer, env.WorldSize)
	fail := func(err error) error {
		for _, p := range pc.peers {
			if p != nil {
				p.c.SetWriteDeadline(time.Now().Add(time.Second))
				writeReply(p.c, 1, []byte(err.Error()))
			}
		}
		tellWaiting(ln, err)
		return err
	}
	for joined := 1; joined < env.WorldSize; joined++ {
		c, err := ln.Accept()
		if err != nil {
			return fail(fmt.Errorf("rendezvous: rank 0 on %s waited on port %d for %s: %w",
				pc.host, env.MasterPort, pc.missing(), errors.Join(context.Cause(ctx), err)))
		}
		deadline, _ := ctx.Deadline()
		c.SetDeadline(deadline)
		p, pfp, err := readWorldHello(c, env.WorldSize)
		if err == nil && pc.peers[p.rank] != nil {
			err = fmt.Errorf("two processes claim RANK=%d (hosts %s and %s)", p.rank, pc.peers[p.rank].host, p.host)
		}
		if err == nil && pfp != fp {
			err = fmt.Errorf("%s runs another spec or binary than rank 0 (host %s): fingerprint %s, rank 0 has %s",
				p.name(), pc.host, short(pfp), short(fp))
		}
		if err != nil {
			err = fmt.Errorf("rendezvous refused: %w", err)
			c.SetWriteDeadline(time.Now().Add(time.Second))
			writeReply(c, 1, []byte(err.Error()))
			c.Close()
			return fail(err)
		}
		pc.peers[p.rank] = p
	}
	for _, p := range pc.peers[1:] {
		if err := writeReply(p.c, 0, nil); err != nil {
			return fail(fmt.Errorf("rendezvous: rank 0 welcoming %s: %w", p.name(), err))
		}
	}
	return nil
}

// tellWaiting gives err to the ranks that connected but were not accepted
// yet: closing the listener would reset them without a word. It reads each
// one's hello first (closing a socket with unread data resets it too).
func tellWaiting(ln net.Listener, err error) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return
	}
	tl.SetDeadline(time.Now().Add(100 * time.Millisecond))
	for {
		c, aerr := tl.Accept()
		if aerr != nil {
			return
		}
		c.SetDeadline(time.Now().Add(time.Second))
		readWorldHello(c, 0)
		writeReply(c, 1, []byte(err.Error()))
		c.Close()
	}
}

// missing names the ranks that have not joined yet.
func (pc *ProcComm) missing() string {
	var m []string
	for r := 1; r < len(pc.peers); r++ {
		if pc.peers[r] == nil {
			m = append(m, strconv.Itoa(r))
		}
	}
	return "rank(s) " + strings.Join(m, ", ") + " (never connected)"
}

func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// readWorldHello reads magic, rank, world, host and fingerprint.
func readWorldHello(c net.Conn, world int) (*peer, string, error) {
	var h struct {
		Magic       [4]byte
		Rank, World uint32
		HostLen     uint16
		FPLen       uint16
	}
	if err := binary.Read(c, binary.BigEndian, &h); err != nil {
		return nil, "", fmt.Errorf("reading a hello from %s: %w", c.RemoteAddr(), err)
	}
	if h.Magic != pgMagic {
		return nil, "", fmt.Errorf("%s is not a resnetlab rank (bad greeting)", c.RemoteAddr())
	}
	if h.HostLen > maxFingerprint || h.FPLen > maxFingerprint {
		return nil, "", fmt.Errorf("%s sent an oversized hello", c.RemoteAddr())
	}
	b := make([]byte, int(h.HostLen)+int(h.FPLen))
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, "", fmt.Errorf("reading a hello from %s: %w", c.RemoteAddr(), err)
	}
	p := &peer{rank: int(h.Rank), host: string(b[:h.HostLen]), c: c}
	switch {
	case int(h.World) != world:
		return nil, "", fmt.Errorf("%s has WORLD_SIZE=%d, rank 0 has %d", p.name(), h.World, world)
	case p.rank < 1 || p.rank >= world:
		return nil, "", fmt.Errorf("host %s says it is RANK=%d, want 1..%d", p.host, p.rank, world-1)
	}
	return p, string(b[h.HostLen:]), nil
}

func (pc *ProcComm) join(ctx context.Context, fp string) error {
	env := pc.env
	addr := net.JoinHostPort(env.MasterAddr, strconv.Itoa(env.MasterPort))
	c, err := dialRetry(ctx, addr)
	if err != nil {
		return fmt.Errorf("rendezvous: rank %d cannot reach rank 0 at MASTER_ADDR:MASTER_PORT %s: %w", env.Rank, addr, err)
	}
	pc.peers = []*peer{{rank: 0, host: env.MasterAddr, c: c}}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	deadline, _ := ctx.Deadline()
	c.SetDeadline(deadline)
	host := pc.host
	if len(host) > maxFingerprint {
		host = host[:maxFingerprint]
	}
	hello := make([]byte, 16, 16+len(host)+len(fp))
	copy(hello, pgMagic[:])
	binary.BigEndian.PutUint32(hello[4:], uint32(env.Rank))
	binary.BigEndian.PutUint32(hello[8:], uint32(env.WorldSize))
	binary.BigEndian.PutUint16(hello[12:], uint16(len(host)))
	binary.BigEndian.PutUint16(hello[14:], uint16(len(fp)))
	hello = append(append(hello, host...), fp...)
	if _, err := c.Write(hello); err != nil {
		return fmt.Errorf("rendezvous: rank %d greeting rank 0 at %s: %w", env.Rank, addr, err)
	}
	status, b, err := readReply(c)
	if err != nil {
		return fmt.Errorf("rendezvous: rank %d waiting for rank 0 at %s to admit it: %w",
			env.Rank, addr, errors.Join(context.Cause(ctx), err))
	}
	if status != 0 {
		return errors.New(string(b))
	}
	return nil
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
		if p == nil {
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

func (pc *ProcComm) close() {
	for _, p := range pc.peers {
		if p != nil {
			p.c.Close()
		}
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
