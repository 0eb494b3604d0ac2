package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
	// JoinTimeout bounds the rendezvous, PeerTimeout a rank's silence
	// (heartbeat.go); 0 means RendezvousTimeout and PeerTimeout.
	JoinTimeout, PeerTimeout time.Duration
	// Launch is the command line that started the world when `resnetlab
	// launch` did (LaunchVar), quoted for a shell, without --resume and
	// the spec: what a rank tells the user to run again. "" otherwise.
	Launch string
}

// LaunchVar is the variable `resnetlab launch` sets in its ranks'
// environment to its own command line (Env.Launch).
const LaunchVar = "RESNETLAB_LAUNCH"

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
	if !ok && err == nil {
		env, ok, err = parseSlurm(os.LookupEnv)
	}
	if ok && err == nil {
		err = parseTimeouts(&env, os.LookupEnv)
	}
	if ok && err == nil {
		env.Launch, err = parseLaunch(os.LookupEnv)
	}
	return env, ok, err
}

// parseLaunch reads LaunchVar: one line of at most 4 KiB.
func parseLaunch(lookup func(string) (string, bool)) (string, error) {
	v, _ := lookup(LaunchVar)
	if len(v) > 4096 || strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("launch environment: %s of %d bytes, want one line of at most 4096 (resnetlab launch sets it)", LaunchVar, len(v))
	}
	return strings.TrimSpace(v), nil
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

// RendezvousTimeout bounds JoinWorld when its context has no deadline
// and RESNETLAB_RENDEZVOUS_TIMEOUT is unset.
var RendezvousTimeout = 5 * time.Minute

// PeerTimeout is how long a rank of a world may be silent (no heartbeat)
// before the world ends naming it, when RESNETLAB_PEER_TIMEOUT is unset.
var PeerTimeout = 15 * time.Second

func (e Env) joinTimeout() time.Duration {
	if e.JoinTimeout > 0 {
		return e.JoinTimeout
	}
	return RendezvousTimeout
}

func (e Env) peerTimeout() time.Duration {
	if e.PeerTimeout > 0 {
		return e.PeerTimeout
	}
	return PeerTimeout
}

// parseTimeouts reads RESNETLAB_RENDEZVOUS_TIMEOUT and
// RESNETLAB_PEER_TIMEOUT (Go durations such as "30s") into e.
func parseTimeouts(e *Env, lookup func(string) (string, bool)) error {
	for k, dst := range map[string]*time.Duration{"RESNETLAB_RENDEZVOUS_TIMEOUT": &e.JoinTimeout, "RESNETLAB_PEER_TIMEOUT": &e.PeerTimeout} {
		v, ok := lookup(k)
		if !ok {
			continue
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 100*time.Millisecond || d > 24*time.Hour {
			return fmt.Errorf("launch environment: %s=%q, want a duration from 100ms to 24h such as \"30s\"", k, v)
		}
		*dst = d
	}
	return nil
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

// dialRetry dials until it connects or ctx ends: rank 0 may start later.
// Its error is one line: how long it tried and the last refusal
// (waitError).
func dialRetry(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	start := time.Now()
	wait := 20 * time.Millisecond
	var last error
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		if last == nil || !isTimeout(err) { // a dial the deadline cut short says nothing new
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, &waitError{cause: context.Cause(ctx), waited: time.Since(start), last: last}
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// isTimeout: err is a dial the context's deadline cut short. The dialer
// derives its own deadline from the context's, so such an error can come
// back before ctx.Err() says the context ended.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// waitError is a wait that its context ended, as one line: why it ended
// (the deadline: "gave up", an interrupt, or the context's own cause),
// after how long, and the last error seen while waiting, shortened to its
// cause ("connection refused"). It matches its cause and its last error
// (errors.Is).
type waitError struct {
	cause  error // context.Cause of the wait's context
	waited time.Duration
	last   error // nil: none worth telling (a store's own timeout)
}

func (e *waitError) Error() string {
	d := roundWait(e.waited)
	var s string
	switch {
	case e.cause == nil || errors.Is(e.cause, context.DeadlineExceeded):
		s = fmt.Sprintf("gave up after %v", d)
	case e.cause == context.Canceled:
		s = fmt.Sprintf("interrupted after %v", d)
	default:
		s = fmt.Sprintf("%v after %v", e.cause, d)
	}
	// The store's own timeout is the deadline again; a connection closed
	// is this rank's own doing once interrupted.
	if e.last != nil && !errors.Is(e.last, ErrStoreTimeout) && !errors.Is(e.last, net.ErrClosed) {
		s += " (last: " + lastCause(e.last) + ")"
	}
	return s
}

func (e *waitError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.cause, e.last} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// roundWait rounds a wait for reading: to 100 ms from 100 ms on, else to
// the millisecond.
func roundWait(d time.Duration) time.Duration {
	if d >= 100*time.Millisecond {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// lastCause is err without what the message around it already says: a
// dial's "dial tcp ADDR: connect: " leaves "connection refused", on one
// line.
func lastCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) && se.Err != nil {
		err = se.Err
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
