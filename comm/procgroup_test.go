package comm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// joinAll joins world ranks (goroutines standing in for processes) with
// fingerprint fps[r] and returns each rank's comm or error.
func joinAll(t testing.TB, world int, fps []string, timeout time.Duration) ([]*ProcComm, []error) {
	t.Helper()
	port := freePort(t)
	pcs, errs := make([]*ProcComm, world), make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			env := Env{Rank: r, WorldSize: world, MasterAddr: "127.0.0.1", MasterPort: port}
			pcs[r], errs[r] = JoinWorld(ctx, env, fps[r])
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, pc := range pcs {
			if pc != nil {
				pc.Close()
			}
		}
	})
	return pcs, errs
}

func fps(world int, fp string) []string {
	s := make([]string, world)
	for i := range s {
		s[i] = fp
	}
	return s
}

// TestProcCommEqualsGroup: the TCP collectives give bit for bit what the
// in-process Group gives, for 2 and 3 ranks.
func TestProcCommEqualsGroup(t *testing.T) {
	for _, world := range []int{2, 3} {
		pcs, errs := joinAll(t, world, fps(world, "same"), 10*time.Second)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("world %d rank %d: %v", world, r, err)
			}
		}
		g := NewGroup(world)
		rng := rand.New(rand.NewPCG(1, uint64(world)))
		in := make([][]float32, world)
		for r := range in {
			in[r] = make([]float32, 3*world*1000+7*world)
			for i := range in[r] {
				in[r][i] = float32(rng.NormFloat64()) * float32(math.Pow(10, float64(rng.IntN(6)-3)))
			}
		}
		ops := []func(c Communicator, r int) []float32{
			func(c Communicator, r int) []float32 { // AllReduce Avg
				b := append([]float32(nil), in[r]...)
				must(t, c.AllReduce(b, Avg))
				return b
			},
			func(c Communicator, r int) []float32 { // AllReduce Sum
				b := append([]float32(nil), in[r]...)
				must(t, c.AllReduce(b, Sum))
				return b
			},
			func(c Communicator, r int) []float32 {
				dst := make([]float32, len(in[r])/world)
				must(t, c.ReduceScatter(dst, in[r], Avg))
				return dst
			},
			func(c Communicator, r int) []float32 {
				n := len(in[r]) / world
				dst := make([]float32, len(in[r]))
				copy(dst[r*n:], in[r][:n])
				must(t, c.AllGather(dst, dst[r*n:r*n+n]))
				return dst
			},
			func(c Communicator, r int) []float32 {
				b := append([]float32(nil), in[r]...)
				must(t, c.Broadcast(b, world-1))
				must(t, c.Barrier())
				return b
			},
		}
		for i, op := range ops {
			want, got := runAll(world, func(r int) Communicator { return g.Comm(r) }, op),
				runAll(world, func(r int) Communicator { return pcs[r] }, op)
			for r := range world {
				for k := range want[r] {
					if math.Float32bits(want[r][k]) != math.Float32bits(got[r][k]) {
						t.Fatalf("world %d op %d rank %d element %d: tcp %v, in-process %v", world, i, r, k, got[r][k], want[r][k])
					}
				}
			}
		}
	}
}

func must(t *testing.T, err error) {
	if err != nil {
		t.Error(err)
	}
}

func runAll(world int, c func(int) Communicator, op func(Communicator, int) []float32) [][]float32 {
	out := make([][]float32, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() { out[r] = op(c(r), r) })
	}
	wg.Wait()
	return out
}

func TestJoinWorldRefusesAnotherFingerprint(t *testing.T) {
	_, errs := joinAll(t, 3, []string{"aaaa", "aaaa", "bbbb"}, 10*time.Second)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 2 (host") || !strings.Contains(err.Error(), "another spec or binary") {
			t.Errorf("rank %d: %v, want a refusal naming rank 2", r, err)
		}
	}
}

func TestJoinWorldNamesMissingRank(t *testing.T) {
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := JoinWorld(ctx, Env{Rank: 0, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}, "x")
	if err == nil || !strings.Contains(err.Error(), "rank(s) 1 (never arrived)") {
		t.Fatalf("%v, want it to name rank 1", err)
	}
}

// TestProcCommPeerLost: a rank whose connection drops (its process was
// killed) ends the others' collectives with an error naming it.
func TestProcCommPeerLost(t *testing.T) {
	pcs, errs := joinAll(t, 3, fps(3, "f"), 10*time.Second)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	pcs[2].close() // as the kernel does for a killed process
	var wg sync.WaitGroup
	got := make([]error, 2)
	for r := range 2 {
		wg.Go(func() { got[r] = pcs[r].AllReduce(make([]float32, 10), Sum) })
	}
	wg.Wait()
	for r, err := range got {
		if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "rank 2 (host") {
			t.Errorf("rank %d: %v, want an abort naming rank 2", r, err)
		}
	}
}

func TestProcCommMismatch(t *testing.T) {
	pcs, errs := joinAll(t, 2, fps(2, "f"), 10*time.Second)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := runAll(2, func(r int) Communicator { return pcs[r] }, func(c Communicator, r int) []float32 {
		if err := c.AllReduce(make([]float32, 4+r), Sum); err == nil || !strings.Contains(err.Error(), "rank 1 passed 5 elements, rank 0 passed 4") {
			t.Errorf("rank %d: %v", r, err)
		}
		return nil
	})
	_ = got
}

func TestProcCommShareBytesAndAgree(t *testing.T) {
	pcs, errs := joinAll(t, 3, fps(3, "f"), 10*time.Second)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	id := make([]byte, 128)
	for i := range id {
		id[i] = byte(255 - i) // 0xff.. words are NaN bit patterns: they must survive
	}
	runAll(3, func(r int) Communicator { return pcs[r] }, func(c Communicator, r int) []float32 {
		var mine []byte
		if r == 0 {
			mine = id
		}
		got, err := c.(*ProcComm).ShareBytes(mine)
		if err != nil || string(got) != string(id) {
			t.Errorf("rank %d: %v, got %x", r, err, got)
		}
		cl := call{kind: kAllReduce, op: Sum, n: 10 + r/2}
		err = c.(*ProcComm).agree(cl)
		if err == nil || !strings.Contains(err.Error(), "rank 2 passed 11 elements, rank 0 passed 10") {
			t.Errorf("rank %d: agree %v", r, err)
		}
		return nil
	})
}

// TestJoinWorldFailures: every rank learns which rank never came; a rank
// with no rank 0 names the address; a duplicate RANK and another
// WORLD_SIZE are refused naming them.
func TestJoinWorldFailures(t *testing.T) {
	port := freePort(t)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 { // rank 2 of 3 never comes
		wg.Go(func() {
			env := Env{Rank: r, WorldSize: 3, MasterAddr: "127.0.0.1", MasterPort: port, JoinTimeout: 500 * time.Millisecond}
			_, errs[r] = JoinWorld(context.Background(), env, "f")
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank(s) 2 (never arrived)") {
			t.Errorf("rank %d without rank 2: %v", r, err)
		}
	}
	_, err := JoinWorld(context.Background(), Env{Rank: 1, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: freePort(t), JoinTimeout: 300 * time.Millisecond}, "f")
	if err == nil || !strings.Contains(err.Error(), "cannot reach rank 0's store at MASTER_ADDR:MASTER_PORT 127.0.0.1:") {
		t.Errorf("no rank 0: %v", err)
	}

	port = freePort(t)
	errs = make([]error, 3)
	pcs := make([]*ProcComm, 3)
	for i, env := range []Env{{Rank: 0, WorldSize: 2}, {Rank: 1, WorldSize: 2}, {Rank: 1, WorldSize: 2}} {
		wg.Go(func() {
			if i == 2 {
				time.Sleep(100 * time.Millisecond) // the second claimant of rank 1
			}
			env.MasterAddr, env.MasterPort, env.JoinTimeout = "127.0.0.1", port, 3*time.Second
			pcs[i], errs[i] = JoinWorld(context.Background(), env, "f")
		})
	}
	wg.Wait()
	for _, pc := range pcs {
		if pc != nil {
			pc.Close()
		}
	}
	if errs[2] == nil || !strings.Contains(errs[2].Error(), "two processes claim RANK=1") {
		t.Errorf("second rank 1: %v", errs[2])
	}

	port = freePort(t)
	errs = make([]error, 2)
	for i, env := range []Env{{Rank: 0, WorldSize: 2}, {Rank: 1, WorldSize: 3}} {
		wg.Go(func() {
			env.MasterAddr, env.MasterPort, env.JoinTimeout = "127.0.0.1", port, 3*time.Second
			_, errs[i] = JoinWorld(context.Background(), env, "f")
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "WORLD_SIZE=3, rank 0 (host") {
			t.Errorf("process %d with mismatched world sizes: %v", i, err)
		}
	}
}

// TestProcCommSilentPeer: a rank that stops beating (a stopped process
// keeps its sockets open) ends the others' collective within the peer
// timeout, naming it; the collective would otherwise wait
// CollectiveTimeout.
func TestProcCommSilentPeer(t *testing.T) {
	port := freePort(t)
	pcs := make([]*ProcComm, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			env := Env{Rank: r, WorldSize: 3, MasterAddr: "127.0.0.1", MasterPort: port, PeerTimeout: 500 * time.Millisecond}
			var err error
			if pcs[r], err = JoinWorld(context.Background(), env, "f"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	defer func() {
		for _, pc := range pcs {
			pc.close()
		}
	}()
	pcs[2].mu.Lock()
	close(pcs[2].done) // rank 2 falls silent, its connections open
	pcs[2].mu.Unlock()
	start := time.Now()
	got := make([]error, 2)
	for r := range 2 {
		wg.Go(func() { got[r] = pcs[r].AllReduce(make([]float32, 10), Sum) })
	}
	wg.Wait()
	for r, err := range got {
		if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "rank 2 (host") || !strings.Contains(err.Error(), "sent no heartbeat") {
			t.Errorf("rank %d: %v, want an abort naming rank 2's silence", r, err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the silent rank was noticed after %v (peer timeout 500 ms)", d)
	}
}

// TestJoinWorldErrorsAreOneLine: a rendezvous that times out or is
// interrupted says, on one line, what it waited for, how long, and the
// last cause: a rank with no rank 0 the address and the refusal, rank 0
// the ranks that never came; before, each was the context's error and the
// last one's, on two lines.
func TestJoinWorldErrorsAreOneLine(t *testing.T) {
	port := freePort(t)
	// A second, not 300 ms: on a loaded 2-core machine a first dial can
	// stall that long, and the error must still name the refusal.
	_, err := JoinWorld(context.Background(), Env{Rank: 1, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port, JoinTimeout: time.Second}, "f")
	want := []string{fmt.Sprintf("rank 1 (host %s) cannot reach rank 0's store at MASTER_ADDR:MASTER_PORT 127.0.0.1:%d: gave up after 1", hostname(), port),
		"(last: connection refused)"}
	checkOneLine(t, "no rank 0", err, want...)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("no rank 0: %v matches neither the deadline nor the refusal", err)
	}

	_, err = JoinWorld(context.Background(), Env{Rank: 0, WorldSize: 3, MasterAddr: "127.0.0.1", MasterPort: freePort(t), JoinTimeout: 300 * time.Millisecond}, "f")
	checkOneLine(t, "rank 0 alone", err, "waited on port", "for rank(s) 1, 2 (never arrived): gave up after 3")
	if strings.Contains(err.Error(), "store: timed out") {
		t.Errorf("rank 0 alone: %v repeats the store's timeout", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err = JoinWorld(ctx, Env{Rank: 0, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: freePort(t)}, "f")
	checkOneLine(t, "rank 0 interrupted", err, "for rank(s) 1 (never arrived): interrupted after 2")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("rank 0 interrupted: %v does not match context.Canceled", err)
	}
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func checkOneLine(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("%s: %q is more than one line", what, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: %q, want %q in it", what, msg, w)
		}
	}
}
