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

// Env is a process's place in a multi-process run, as torchrun, `colossalai
// run`, srun or `resnetlab launch` describe it (colossalai.launch_from_torch).
// LocalWorldSize and GroupRank are 0 when the launcher did not say.
type Env struct {
	Rank, LocalRank, WorldSize int
	MasterAddr                 string
	MasterPort                 int
	LocalWorldSize, GroupRank  int
}

// torchVars are the variables EnvFromLaunch reads, all required together.
var torchVars = []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}

// EnvFromLaunch reads this process's place from torchrun's variables
// (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and
// LOCAL_WORLD_SIZE and GROUP_RANK where set) or, when none of them is set,
// from srun's (slurm.go). ok is false (with a one-rank Env) when neither
// launcher started the process: a plain single-process run. Setting only
// some of them, a malformed value or two that contradict each other is an
// error naming the variable.
func EnvFromLaunch() (env Env, ok bool, err error) {
	env, ok, err = parseEnv(os.LookupEnv)
	if ok || err != nil {
		return env, ok, err
	}
	return parseSlurm(os.LookupEnv)
}

func parseEnv(lookup func(string) (string, bool)) (Env, bool, error) {
	var set, missing []string
	vals := map[string]string{}
	for _, k := range torchVars {
		if v, ok := lookup(k); ok {
			set = append(set, k)
			vals[k] = strings.TrimSpace(v)
		} else {
			missing = append(missing, k)
		}
	}
	if len(set) == 0 {
		return Env{WorldSize: 1}, false, nil
	}
	if len(missing) > 0 {
		return Env{}, false, fmt.Errorf("launch environment: %s set but %s missing (torchrun sets all of %s)",
			strings.Join(set, ", "), strings.Join(missing, ", "), strings.Join(torchVars, ", "))
	}
	for _, k := range []string{"LOCAL_WORLD_SIZE", "GROUP_RANK"} {
		if v, ok := lookup(k); ok {
			vals[k] = strings.TrimSpace(v)
		}
	}
	var e Env
	var err error
	num := func(k string, lo, hi int) int {
		n, perr := strconv.Atoi(vals[k])
		if err == nil && (perr != nil || n < lo || n > hi) {
			err = fmt.Errorf("launch environment: %s=%q, want an integer in [%d,%d]", k, vals[k], lo, hi)
		}
		return n
	}
	e.WorldSize = num("WORLD_SIZE", 1, 1<<20)
	e.Rank = num("RANK", 0, e.WorldSize-1)
	e.LocalRank = num("LOCAL_RANK", 0, e.WorldSize-1)
	e.MasterPort = num("MASTER_PORT", 1, 65535)
	if _, ok := vals["LOCAL_WORLD_SIZE"]; ok {
		e.LocalWorldSize = num("LOCAL_WORLD_SIZE", e.LocalRank+1, e.WorldSize)
	}
	if _, ok := vals["GROUP_RANK"]; ok {
		e.GroupRank = num("GROUP_RANK", 0, e.WorldSize-1)
	}
	e.MasterAddr = vals["MASTER_ADDR"]
	if err == nil && e.MasterAddr == "" {
		err = errors.New(`launch environment: MASTER_ADDR="", want the master's host name or IP address`)
	}
	if err == nil {
		err = e.checkGroup(vals)
	}
	if err != nil {
		return Env{}, false, err
	}
	return e, true, nil
}

// checkGroup checks RANK against GROUP_RANK and LOCAL_WORLD_SIZE when both
// are set: torchrun numbers the ranks of node g as g*LOCAL_WORLD_SIZE +
// LOCAL_RANK.
func (e Env) checkGroup(vals map[string]string) error {
	_, hasG := vals["GROUP_RANK"]
	_, hasL := vals["LOCAL_WORLD_SIZE"]
	if !hasG || !hasL {
		return nil
	}
	if want := e.GroupRank*e.LocalWorldSize + e.LocalRank; want != e.Rank {
		return fmt.Errorf("launch environment: RANK=%d conflicts with GROUP_RANK=%d, LOCAL_WORLD_SIZE=%d and LOCAL_RANK=%d "+
			"(want RANK = GROUP_RANK*LOCAL_WORLD_SIZE+LOCAL_RANK = %d)", e.Rank, e.GroupRank, e.LocalWorldSize, e.LocalRank, want)
	}
	return nil
}

// RendezvousTimeout bounds ExchangeID when its context has no deadline.
var RendezvousTimeout = 5 * time.Minute

// maxPayload bounds what ExchangeID carries (an NCCL id is 128 bytes).
const maxPayload = 1 << 16

var rvMagic = [4]byte{'r', 'l', 'r', 'v'}

// ExchangeID hands rank 0's payload (the NCCL unique id) to every rank over
// TCP and returns it on every rank; id is ignored on the other ranks. Rank 0
// listens on MASTER_PORT, on all interfaces like torch's TCPStore, because
// MASTER_ADDR may name the host by an address it cannot bind (a NAT or
// /etc/hosts alias); the others dial MASTER_ADDR:MASTER_PORT, retrying until
// rank 0 is up. Rank 0 answers only once all WORLD_SIZE-1 ranks have
// checked in, so the exchange is also a barrier. It fails when ctx ends, or
// after RendezvousTimeout if ctx has no deadline.
func ExchangeID(ctx context.Context, env Env, id []byte) ([]byte, error) {
	if env.WorldSize < 1 || env.Rank < 0 || env.Rank >= env.WorldSize {
		return nil, fmt.Errorf("rendezvous: rank %d of world size %d", env.Rank, env.WorldSize)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, RendezvousTimeout)
		defer cancel()
	}
	if env.Rank != 0 {
		return fetchID(ctx, env)
	}
	if len(id) == 0 || len(id) > maxPayload {
		return nil, fmt.Errorf("rendezvous: rank 0's payload has %d bytes, want 1..%d", len(id), maxPayload)
	}
	if env.WorldSize == 1 {
		return append([]byte(nil), id...), nil
	}
	return serveID(ctx, env, id)
}

func serveID(ctx context.Context, env Env, id []byte) ([]byte, error) {
	addr := net.JoinHostPort("", strconv.Itoa(env.MasterPort))
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank 0 cannot listen on MASTER_PORT %d: %w", env.MasterPort, err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() }) // unblocks Accept
	defer stop()

	conns := make([]net.Conn, env.WorldSize)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for joined := 1; joined < env.WorldSize; joined++ {
		c, err := ln.Accept()
		if err != nil {
			err = fmt.Errorf("rendezvous: rank 0 waited on port %d for %d more of %d ranks: %w",
				env.MasterPort, env.WorldSize-joined, env.WorldSize, errors.Join(context.Cause(ctx), err))
			failAll(conns, err)
			return nil, err
		}
		deadline, _ := ctx.Deadline()
		c.SetDeadline(deadline)
		rank, err := readHello(c, env.WorldSize, conns)
		if err != nil {
			err = fmt.Errorf("rendezvous: rank 0: %w", err)
			failAll(append(conns, c), err)
			c.Close()
			return nil, err
		}
		conns[rank] = c
	}
	for r, c := range conns {
		if c != nil {
			if err := writeReply(c, 0, id); err != nil {
				return nil, fmt.Errorf("rendezvous: rank 0 sending the id to rank %d: %w", r, err)
			}
		}
	}
	return append([]byte(nil), id...), nil
}

// readHello reads a peer's magic, rank and world size and checks them.
func readHello(c net.Conn, world int, conns []net.Conn) (int, error) {
	var h struct {
		Magic       [4]byte
		Rank, World uint32
	}
	if err := binary.Read(c, binary.BigEndian, &h); err != nil {
		return 0, fmt.Errorf("reading a hello from %s: %w", c.RemoteAddr(), err)
	}
	r := int(h.Rank)
	switch {
	case h.Magic != rvMagic:
		return 0, fmt.Errorf("%s is not a resnetlab rank (bad greeting)", c.RemoteAddr())
	case int(h.World) != world:
		return 0, fmt.Errorf("rank %d at %s has WORLD_SIZE=%d, rank 0 has %d", r, c.RemoteAddr(), h.World, world)
	case r < 1 || r >= world:
		return 0, fmt.Errorf("%s says it is rank %d, want 1..%d", c.RemoteAddr(), r, world-1)
	case conns[r] != nil:
		return 0, fmt.Errorf("two processes claim RANK=%d (%s and %s)", r, conns[r].RemoteAddr(), c.RemoteAddr())
	}
	return r, nil
}

// failAll tells every connected peer why the rendezvous failed.
func failAll(conns []net.Conn, err error) {
	for _, c := range conns {
		if c != nil {
			c.SetWriteDeadline(time.Now().Add(time.Second)) // ctx may be over
			writeReply(c, 1, []byte(err.Error()))
		}
	}
}

// writeReply sends a status byte (0 ok, 1 error), a length and the bytes.
func writeReply(c net.Conn, status byte, b []byte) error {
	msg := make([]byte, 5)
	msg[0] = status
	binary.BigEndian.PutUint32(msg[1:], uint32(len(b)))
	bufs := net.Buffers{msg, b} // one writev, no copy of b
	_, err := bufs.WriteTo(c)
	return err
}

func fetchID(ctx context.Context, env Env) ([]byte, error) {
	addr := net.JoinHostPort(env.MasterAddr, strconv.Itoa(env.MasterPort))
	c, err := dialRetry(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank %d cannot reach rank 0 at MASTER_ADDR:MASTER_PORT %s: %w", env.Rank, addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	deadline, _ := ctx.Deadline()
	c.SetDeadline(deadline)

	hello := make([]byte, 12)
	copy(hello, rvMagic[:])
	binary.BigEndian.PutUint32(hello[4:], uint32(env.Rank))
	binary.BigEndian.PutUint32(hello[8:], uint32(env.WorldSize))
	if _, err := c.Write(hello); err != nil {
		return nil, fmt.Errorf("rendezvous: rank %d greeting rank 0 at %s: %w", env.Rank, addr, err)
	}
	var head [5]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return nil, fmt.Errorf("rendezvous: rank %d waiting for rank 0 at %s to send the id: %w",
			env.Rank, addr, errors.Join(context.Cause(ctx), err))
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxPayload {
		return nil, fmt.Errorf("rendezvous: rank 0 at %s announced %d bytes, more than %d", addr, n, maxPayload)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, fmt.Errorf("rendezvous: rank %d reading the id from %s: %w", env.Rank, addr, err)
	}
	if head[0] != 0 {
		return nil, fmt.Errorf("rendezvous: rank 0 refused rank %d: %s", env.Rank, b)
	}
	return b, nil
}

// dialRetry dials until it connects or ctx ends: rank 0 may start later.
func dialRetry(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	wait := 20 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(context.Cause(ctx), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
