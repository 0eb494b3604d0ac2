package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The rendezvous on the store. Keys:
//
//	rdzv/claim/R    counter: how many processes said they are rank R
//	rdzv/hello/R    rank R's "WORLD_SIZE\nhost\nfingerprint"
//	rdzv/seen/R     set by rank R once it has read the verdict
//	rdzv/verdict    rank 0's answer: "ok\nPORT\nhost0\nhost1..." or "err\nmessage"
//	hb/R, left/R    rank R's heartbeat counter; set when it closes (heartbeat.go)
//	share/N         the N-th ShareBytes (the NCCL unique id)
//
// Rank 0 waits for every hello, checks them against its own and writes
// the verdict; every rank reads it, so a refusal reaches all of them before
// anything trains. The collectives then run on connections of their own:
// rank 0 listens on a port the system picks (all interfaces) and the
// verdict carries it; the others dial MASTER_ADDR at that port.

func claimKey(r int) string { return "rdzv/claim/" + strconv.Itoa(r) }
func helloKey(r int) string { return "rdzv/hello/" + strconv.Itoa(r) }

func seenKey(r int) string { return "rdzv/seen/" + strconv.Itoa(r) }

const verdictKey = "rdzv/verdict"

// lingerForSeen keeps a refusing rank 0's store up until every rank that
// said hello has read the verdict (rdzv/seen/R), at most two seconds:
// closing it at once would leave them an EOF instead of the reason.
func (pc *ProcComm) lingerForSeen() {
	var keys []string
	for r := 1; r < pc.env.WorldSize; r++ {
		if ok, err := pc.store.Check([]string{helloKey(r)}, time.Second); err == nil && ok {
			keys = append(keys, seenKey(r))
		}
	}
	pc.store.Wait(keys, 2*time.Second)
}

// JoinWorld joins env's world: rank 0 serves the store on MASTER_PORT (all
// interfaces: MASTER_ADDR may name the host by an address it cannot bind)
// and every rank connects to it at MASTER_ADDR:MASTER_PORT, retrying until
// rank 0 is up. Every rank publishes its host name and fingerprint (a
// digest of the spec and binary it runs); rank 0 refuses a rank whose
// fingerprint or WORLD_SIZE differs from its own or a RANK claimed twice,
// and every rank learns why. It fails when ctx ends, or after env's join
// timeout (RendezvousTimeout by default) if ctx has no deadline, naming the
// ranks that never arrived. A world of one serves and uses the store too.
func JoinWorld(ctx context.Context, env Env, fingerprint string) (*ProcComm, error) {
	if env.WorldSize < 1 || env.Rank < 0 || env.Rank >= env.WorldSize {
		return nil, fmt.Errorf("rendezvous: rank %d of world size %d", env.Rank, env.WorldSize)
	}
	if len(fingerprint) > maxFingerprint {
		return nil, fmt.Errorf("rendezvous: fingerprint of %d bytes, want at most %d", len(fingerprint), maxFingerprint)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, env.joinTimeout())
		defer cancel()
	}
	host, _ := os.Hostname()
	if host == "" || strings.ContainsAny(host, "\n") || len(host) > 255 {
		host = "unknown"
	}
	pc := &ProcComm{env: env, host: host, done: make(chan struct{}), start: time.Now()}
	if err := pc.rendezvous(ctx, fingerprint); err != nil {
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
	pc.startHeartbeats()
	return pc, nil
}

func (pc *ProcComm) rendezvous(ctx context.Context, fp string) error {
	env := pc.env
	port := strconv.Itoa(env.MasterPort)
	addr := net.JoinHostPort(env.MasterAddr, port)
	var pg net.Listener
	if env.Rank == 0 {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", port))
		if err != nil {
			return fmt.Errorf("rendezvous: rank 0 cannot listen on MASTER_PORT %d: %w", env.MasterPort, err)
		}
		pc.server = ServeStore(ln)
		addr = net.JoinHostPort("127.0.0.1", port) // rank 0 reaches its own store on loopback
		if pg, err = lc.Listen(ctx, "tcp", ":0"); err != nil {
			return fmt.Errorf("rendezvous: rank 0 cannot listen for the collectives: %w", err)
		}
		defer pg.Close()
	}
	c, err := dialRetry(ctx, addr)
	if err != nil {
		return fmt.Errorf("rendezvous: rank %d (host %s) cannot reach rank 0's store at MASTER_ADDR:MASTER_PORT %s: %w",
			env.Rank, pc.host, addr, err)
	}
	pc.store = &StoreClient{addr: addr, c: c}
	stop := context.AfterFunc(ctx, func() { // interrupted: a deadline ends the store's waits by itself
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			pc.store.Close()
		}
	})
	defer stop()
	if err := pc.hello(ctx, fp); err != nil {
		return err
	}
	if env.Rank == 0 {
		return pc.judge(ctx, fp, pg)
	}
	return pc.admitted(ctx)
}

// ended is err, from a wait of the rendezvous, as one line: when ctx
// ended the wait, or the store's own timeout did (ctx's deadline, which
// the store may answer a moment before ctx ends), what ended it and how
// long after the rendezvous began (waitError); any other error as it is.
func (pc *ProcComm) ended(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	if cause == nil && !errors.Is(err, ErrStoreTimeout) {
		return err
	}
	return &waitError{cause: cause, waited: time.Since(pc.start), last: err}
}

// left is what remains of ctx's time (at least a millisecond).
func left(ctx context.Context) time.Duration {
	d, _ := ctx.Deadline()
	return max(time.Until(d), time.Millisecond)
}

// hello claims this rank and publishes its world size, host and fingerprint.
func (pc *ProcComm) hello(ctx context.Context, fp string) error {
	r := pc.env.Rank
	n, err := pc.store.Add(claimKey(r), 1, left(ctx))
	if err != nil {
		return fmt.Errorf("rendezvous: rank %d (host %s) claiming RANK=%d in the store: %w", r, pc.host, r, pc.ended(ctx, err))
	}
	if n > 1 {
		other := "another host"
		if b, err := pc.store.Get(helloKey(r), time.Second); err == nil {
			if f := strings.SplitN(string(b), "\n", 3); len(f) == 3 {
				other = "host " + f[1]
			}
		}
		return fmt.Errorf("rendezvous refused: two processes claim RANK=%d (%s and host %s)", r, other, pc.host)
	}
	msg := fmt.Sprintf("%d\n%s\n%s", pc.env.WorldSize, pc.host, fp)
	if err := pc.store.Set(helloKey(r), []byte(msg), left(ctx)); err != nil {
		return fmt.Errorf("rendezvous: rank %d (host %s) publishing its hello: %w", r, pc.host, pc.ended(ctx, err))
	}
	return nil
}

// judge is rank 0's half: wait for every hello, check them, publish the
// verdict, and accept the other ranks' collective connections.
func (pc *ProcComm) judge(ctx context.Context, fp string, pg net.Listener) error {
	w := pc.env.WorldSize
	keys := make([]string, 0, w)
	for r := 1; r < w; r++ {
		keys = append(keys, helloKey(r))
	}
	pc.peers = make([]*peer, w)
	refuse := func(err error) error {
		pc.store.Set(verdictKey, []byte("err\n"+err.Error()), time.Second)
		pc.lingerForSeen()
		return err
	}
	if err := pc.store.Wait(keys, left(ctx)); err != nil {
		return refuse(fmt.Errorf("rendezvous: rank 0 (host %s) waited on port %d for %s: %w",
			pc.host, pc.env.MasterPort, pc.missing(), pc.ended(ctx, err)))
	}
	for r := 1; r < w; r++ {
		p, err := pc.checkHello(r, fp)
		if err != nil {
			return refuse(fmt.Errorf("rendezvous refused: %w", err))
		}
		pc.peers[r] = p
	}
	hosts := []string{pc.host}
	for _, p := range pc.peers[1:] {
		hosts = append(hosts, p.host)
	}
	pgPort := pg.Addr().(*net.TCPAddr).Port
	if err := pc.store.Set(verdictKey, fmt.Appendf(nil, "ok\n%d\n%s", pgPort, strings.Join(hosts, "\n")), left(ctx)); err != nil {
		return fmt.Errorf("rendezvous: rank 0 publishing the verdict: %w", err)
	}
	return pc.acceptPeers(ctx, pg)
}

// checkHello reads rank r's hello and compares it with rank 0's.
func (pc *ProcComm) checkHello(r int, fp string) (*peer, error) {
	b, err := pc.store.Get(helloKey(r), time.Second)
	if err != nil {
		return nil, err
	}
	f := strings.SplitN(string(b), "\n", 3)
	if len(f) != 3 {
		return nil, fmt.Errorf("rank %d sent a malformed hello", r)
	}
	p := &peer{rank: r, host: f[1]}
	if n, err := pc.store.Add(claimKey(r), 0, time.Second); err == nil && n > 1 {
		return nil, fmt.Errorf("two processes claim RANK=%d (one on host %s)", r, p.host)
	}
	if f[0] != strconv.Itoa(pc.env.WorldSize) {
		return nil, fmt.Errorf("%s has WORLD_SIZE=%s, rank 0 (host %s) has %d", p.name(), f[0], pc.host, pc.env.WorldSize)
	}
	if f[2] != fp {
		return nil, fmt.Errorf("%s runs another spec or binary than rank 0 (host %s): fingerprint %s, rank 0 has %s",
			p.name(), pc.host, short(f[2]), short(fp))
	}
	return p, nil
}

// missing names the ranks whose hello is not in the store. Rank 0 reads
// its own server, which an interrupt leaves readable (it closes the
// client).
func (pc *ProcComm) missing() string {
	var m []string
	for r := range pc.env.WorldSize {
		var ok bool
		var err error
		if pc.server != nil {
			ok = pc.server.has(helloKey(r))
		} else {
			ok, err = pc.store.Check([]string{helloKey(r)}, time.Second)
		}
		if err != nil {
			return "the other ranks"
		}
		if !ok {
			m = append(m, strconv.Itoa(r))
		}
	}
	if len(m) == 0 {
		return "no rank"
	}
	return "rank(s) " + strings.Join(m, ", ") + " (never arrived)"
}

// acceptPeers takes every other rank's collective connection: magic and rank.
func (pc *ProcComm) acceptPeers(ctx context.Context, pg net.Listener) error {
	stop := context.AfterFunc(ctx, func() { pg.Close() })
	defer stop()
	fail := func(err error) error {
		for _, p := range pc.peers[1:] {
			if p.c != nil {
				p.c.SetWriteDeadline(time.Now().Add(time.Second))
				writeReply(p.c, 1, []byte(err.Error()))
			}
		}
		return err
	}
	for joined := 1; joined < pc.env.WorldSize; joined++ {
		c, err := pg.Accept()
		if err != nil {
			var m []string
			for _, p := range pc.peers[1:] {
				if p.c == nil {
					m = append(m, p.name())
				}
			}
			return fail(fmt.Errorf("rendezvous: rank 0 (host %s) waited for the collective connections of %s: %w",
				pc.host, strings.Join(m, ", "), pc.ended(ctx, err)))
		}
		c.SetDeadline(time.Now().Add(min(left(ctx), 10*time.Second)))
		var h [8]byte
		_, err = io.ReadFull(c, h[:])
		r := int(binary.BigEndian.Uint32(h[4:]))
		if err != nil || [4]byte(h[:4]) != pgMagic || r < 1 || r >= pc.env.WorldSize || pc.peers[r].c != nil {
			c.Close() // not one of this world's ranks: a stray connection
			joined--
			continue
		}
		pc.peers[r].c = c
	}
	for _, p := range pc.peers[1:] {
		if err := writeReply(p.c, 0, nil); err != nil {
			return fail(fmt.Errorf("rendezvous: rank 0 welcoming %s: %w", p.name(), err))
		}
	}
	return nil
}

// admitted is the other ranks' half: read the verdict, check it, and
// connect to rank 0 for the collectives.
func (pc *ProcComm) admitted(ctx context.Context) error {
	env := pc.env
	b, err := pc.store.Get(verdictKey, left(ctx))
	if err != nil {
		return fmt.Errorf("rendezvous: rank %d (host %s) waited for rank 0's verdict (still missing: %s): %w",
			env.Rank, pc.host, pc.missing(), pc.ended(ctx, err))
	}
	pc.store.Set(seenKey(env.Rank), nil, time.Second)
	f := strings.Split(string(b), "\n")
	if f[0] != "ok" {
		return errors.New(strings.TrimPrefix(string(b), "err\n"))
	}
	if len(f) != 2+env.WorldSize {
		// rank 0 judged a world of another size (and never waited for this rank)
		return fmt.Errorf("rendezvous refused: rank %d (host %s) has WORLD_SIZE=%d, rank 0 (host %s) has %d",
			env.Rank, pc.host, env.WorldSize, f[min(2, len(f)-1)], max(len(f)-2, 0))
	}
	pgAddr := net.JoinHostPort(env.MasterAddr, f[1])
	c, err := dialRetry(ctx, pgAddr)
	if err != nil {
		return fmt.Errorf("rendezvous: rank %d cannot reach rank 0 (host %s) for the collectives at %s: %w", env.Rank, f[2], pgAddr, err)
	}
	pc.peers = []*peer{{rank: 0, host: f[2], c: c}}
	c.SetDeadline(time.Now().Add(left(ctx)))
	var h [8]byte
	copy(h[:], pgMagic[:])
	binary.BigEndian.PutUint32(h[4:], uint32(env.Rank))
	if _, err := c.Write(h[:]); err != nil {
		return fmt.Errorf("rendezvous: rank %d greeting rank 0 at %s: %w", env.Rank, pgAddr, err)
	}
	status, msg, err := readReply(c)
	if err != nil {
		return fmt.Errorf("rendezvous: rank %d waiting for rank 0 (host %s) to admit it: %w", env.Rank, f[2], pc.ended(ctx, err))
	}
	if status != 0 {
		return errors.New(string(msg))
	}
	return nil
}

// Store is the world's store (rank 0 serves it): for keys of the caller's
// own, in addition to the rendezvous's and the heartbeats'.
func (pc *ProcComm) Store() *StoreClient { return pc.store }
