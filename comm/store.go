package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// A Store is a small key-value store on TCP that the processes of a world
// share, in the manner of torch's TCPStore: rank 0 serves it at
// MASTER_ADDR:MASTER_PORT (StoreServer) and every rank, rank 0 included,
// talks to it through a StoreClient. Set, Get (which waits for the key),
// Add (an atomic counter) and Wait carry timeouts, so a rank that never
// writes a key ends the waiter with an error instead of a hang. The
// rendezvous (JoinWorld), the NCCL unique id and the heartbeats go
// through it.
//
// The wire: a request is an op byte, a timeout in milliseconds (uint32),
// a key count (uint16), each key as a uint16 length and its bytes, and a
// value as a uint32 length and its bytes; the reply is a status byte
// (storeOK, storeTimeout, storeErr) and a uint32-length value.

const (
	stSet byte = iota + 1
	stGet
	stAdd
	stWait
	stCheck
)

const (
	storeOK byte = iota
	storeTimeout
	storeErr
)

// Limits that bound what one client can make the server hold.
const (
	maxStoreKey   = 1024
	maxStoreKeys  = 1 << 12 // keys in one Wait or Check
	maxStoreValue = 1 << 20
	maxStoreBytes = 64 << 20 // all values together
)

// ErrStoreTimeout is returned when a Get or Wait outlives its timeout.
var ErrStoreTimeout = errors.New("store: timed out")

// StoreServer serves a Store on a listener until Close.
type StoreServer struct {
	ln      net.Listener
	mu      sync.Mutex
	vals    map[string][]byte
	touched map[string]time.Time
	size    int
	changed chan struct{} // closed and replaced on every write
	done    chan struct{}
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

// ServeStore serves a Store on ln (it takes ln over; Close closes it).
func ServeStore(ln net.Listener) *StoreServer {
	s := &StoreServer{ln: ln, vals: map[string][]byte{}, touched: map[string]time.Time{},
		changed: make(chan struct{}), done: make(chan struct{}), conns: map[net.Conn]bool{}}
	s.wg.Go(s.accept)
	return s
}

// Addr is the address the server listens on.
func (s *StoreServer) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server and drops every client.
func (s *StoreServer) Close() error {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return nil
	default:
	}
	close(s.done)
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// Touched is when key was last set or added to (zero if never): the
// heartbeat monitor's clock is the server's own, so the hosts' clocks
// need not agree.
func (s *StoreServer) Touched(key string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.touched[key]
}

func (s *StoreServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Go(func() {
			s.serve(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		})
	}
}

// serve answers one client's requests in turn.
func (s *StoreServer) serve(c net.Conn) {
	for {
		op, timeout, keys, val, err := readRequest(c)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				writeReply(c, storeErr, []byte(err.Error()))
			}
			return
		}
		status, out := s.do(op, timeout, keys, val)
		if err := writeReply(c, status, out); err != nil {
			return
		}
	}
}

func (s *StoreServer) do(op byte, timeout time.Duration, keys []string, val []byte) (byte, []byte) {
	one := len(keys) == 1
	switch {
	case op == stSet && one:
		return s.set(keys[0], val)
	case op == stAdd && one && len(val) == 8:
		return s.add(keys[0], int64(binary.BigEndian.Uint64(val)))
	case op == stGet && one:
		if !s.wait(keys, timeout) {
			return storeTimeout, nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return storeOK, s.vals[keys[0]]
	case op == stWait:
		if !s.wait(keys, timeout) {
			return storeTimeout, nil
		}
		return storeOK, nil
	case op == stCheck:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.have(keys) {
			return storeOK, []byte{1}
		}
		return storeOK, []byte{0}
	}
	return storeErr, fmt.Appendf(nil, "bad request: op %d with %d key(s) and a %d-byte value", op, len(keys), len(val))
}

func (s *StoreServer) set(key string, val []byte) (byte, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	grow := len(val) - len(s.vals[key])
	if s.size+grow > maxStoreBytes {
		return storeErr, fmt.Appendf(nil, "store full: %d bytes held, limit %d", s.size, maxStoreBytes)
	}
	s.size += grow
	s.vals[key] = val
	s.wrote(key)
	return storeOK, nil
}

func (s *StoreServer) add(key string, delta int64) (byte, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	if v, ok := s.vals[key]; ok {
		var err error
		if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
			return storeErr, fmt.Appendf(nil, "key %q holds %q, not a counter", key, v)
		}
	}
	n += delta
	v := strconv.AppendInt(nil, n, 10)
	s.size += len(v) - len(s.vals[key])
	s.vals[key] = v
	s.wrote(key)
	return storeOK, v
}

// wrote wakes every waiter; s.mu is held.
func (s *StoreServer) wrote(key string) {
	s.touched[key] = time.Now()
	close(s.changed)
	s.changed = make(chan struct{})
}

// has reports whether key is set.
func (s *StoreServer) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.have([]string{key})
}

func (s *StoreServer) have(keys []string) bool {
	for _, k := range keys {
		if _, ok := s.vals[k]; !ok {
			return false
		}
	}
	return true
}

// wait waits until every key is set; false after timeout or on Close.
func (s *StoreServer) wait(keys []string, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok, ch := s.have(keys), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-s.done:
			return false
		}
	}
}

func readRequest(c net.Conn) (op byte, timeout time.Duration, keys []string, val []byte, err error) {
	var h [7]byte
	if _, err = io.ReadFull(c, h[:]); err != nil {
		return
	}
	op, timeout = h[0], time.Duration(binary.BigEndian.Uint32(h[1:]))*time.Millisecond
	n := int(binary.BigEndian.Uint16(h[5:]))
	if n > maxStoreKeys {
		return 0, 0, nil, nil, fmt.Errorf("store: request with %d keys, limit %d", n, maxStoreKeys)
	}
	var l [4]byte
	for range n {
		if _, err = io.ReadFull(c, l[:2]); err != nil {
			return
		}
		kl := int(binary.BigEndian.Uint16(l[:2]))
		if kl > maxStoreKey {
			return 0, 0, nil, nil, fmt.Errorf("store: key of %d bytes, limit %d", kl, maxStoreKey)
		}
		k := make([]byte, kl)
		if _, err = io.ReadFull(c, k); err != nil {
			return
		}
		keys = append(keys, string(k))
	}
	if _, err = io.ReadFull(c, l[:]); err != nil {
		return
	}
	vl := binary.BigEndian.Uint32(l[:])
	if vl > maxStoreValue {
		return 0, 0, nil, nil, fmt.Errorf("store: value of %d bytes, limit %d", vl, maxStoreValue)
	}
	val = make([]byte, vl)
	_, err = io.ReadFull(c, val)
	return
}

// StoreClient is one connection to a StoreServer; its calls take turns.
type StoreClient struct {
	addr string
	mu   sync.Mutex
	c    net.Conn
}

// DialStore connects to the store at addr, retrying until it is up (the
// server's rank may start later) or ctx ends.
func DialStore(ctx context.Context, addr string) (*StoreClient, error) {
	c, err := dialRetry(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("store at %s: %w", addr, err)
	}
	return &StoreClient{addr: addr, c: c}, nil
}

// Close drops the connection; calls in progress fail.
func (sc *StoreClient) Close() error { return sc.c.Close() }

// Set stores val under key, waking every Get and Wait of it.
func (sc *StoreClient) Set(key string, val []byte, timeout time.Duration) error {
	_, err := sc.call(stSet, timeout, []string{key}, val)
	return err
}

// Get waits up to timeout for key and returns its value.
func (sc *StoreClient) Get(key string, timeout time.Duration) ([]byte, error) {
	return sc.call(stGet, timeout, []string{key}, nil)
}

// Add adds delta to the counter under key (0 when unset) and returns the
// sum; Add(key, 0) reads a counter.
func (sc *StoreClient) Add(key string, delta int64, timeout time.Duration) (int64, error) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(delta))
	v, err := sc.call(stAdd, timeout, []string{key}, b[:])
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// Wait waits up to timeout until every key is set.
func (sc *StoreClient) Wait(keys []string, timeout time.Duration) error {
	_, err := sc.call(stWait, timeout, keys, nil)
	return err
}

// Check reports whether every key is set, without waiting.
func (sc *StoreClient) Check(keys []string, timeout time.Duration) (bool, error) {
	v, err := sc.call(stCheck, timeout, keys, nil)
	return len(v) == 1 && v[0] == 1, err
}

// storeSlack is how much longer than the server's own timeout a client
// waits for the reply before it gives the server up.
const storeSlack = 2 * time.Second

func (sc *StoreClient) call(op byte, timeout time.Duration, keys []string, val []byte) ([]byte, error) {
	ms := min(max(timeout.Milliseconds(), 1), 1<<32-1)
	if len(keys) > maxStoreKeys || len(val) > maxStoreValue {
		return nil, fmt.Errorf("store: request of %d keys and %d bytes, limits %d and %d", len(keys), len(val), maxStoreKeys, maxStoreValue)
	}
	b := make([]byte, 7, 7+len(val)+4)
	b[0] = op
	binary.BigEndian.PutUint32(b[1:], uint32(ms))
	binary.BigEndian.PutUint16(b[5:], uint16(len(keys)))
	for _, k := range keys {
		if len(k) > maxStoreKey {
			return nil, fmt.Errorf("store: key of %d bytes, limit %d", len(k), maxStoreKey)
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(val)))
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.c.SetDeadline(time.Now().Add(time.Duration(ms)*time.Millisecond + storeSlack))
	bufs := net.Buffers{b, val}
	if _, err := bufs.WriteTo(sc.c); err != nil {
		return nil, fmt.Errorf("store at %s: %w", sc.addr, err)
	}
	status, out, err := readReply(sc.c)
	switch {
	case err != nil:
		return nil, fmt.Errorf("store at %s: %w", sc.addr, err)
	case status == storeTimeout:
		return nil, fmt.Errorf("%w after %v waiting for %q", ErrStoreTimeout, roundWait(timeout), keys)
	case status != storeOK:
		return nil, fmt.Errorf("store at %s: %s", sc.addr, out)
	}
	return out, nil
}
