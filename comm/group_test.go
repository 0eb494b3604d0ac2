package comm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"resnetlab/internal/testutil"
)

var (
	testSizes  = []int{0, 1, 7, 1000, 4099}
	testWorlds = []int{1, 2, 3, 4, 5}
)

// onRanks runs fn(rank, comm) on every rank of a fresh group and fails the
// test on any error.
func onRanks(t *testing.T, world int, fn func(r int, c Communicator) error) {
	t.Helper()
	g := NewGroup(world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() { errs[r] = fn(r, g.Comm(r)) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// randomInputs gives each rank n values of mixed magnitude, so that a sum in
// another order than rank order differs in the last bits somewhere.
func randomInputs(seed uint64, world, n int) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	xs := make([][]float32, world)
	for r := range xs {
		xs[r] = make([]float32, n)
		for i := range xs[r] {
			xs[r][i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
		}
	}
	return xs
}

// seqReduce is the reference: a plain loop over ranks in order.
func seqReduce(xs [][]float32, op Op) []float32 {
	out := make([]float32, len(xs[0]))
	for i := range out {
		s := xs[0][i]
		for r := 1; r < len(xs); r++ {
			s += xs[r][i]
		}
		if op == Avg {
			s /= float32(len(xs))
		}
		out[i] = s
	}
	return out
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if err := testutil.DiffBits(what, got, want); err != nil {
		t.Fatal(err)
	}
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }

func TestAllReduce(t *testing.T) {
	for _, w := range testWorlds {
		for _, n := range testSizes {
			for _, op := range []Op{Sum, Avg} {
				name := fmt.Sprintf("w%d/n%d/%s", w, n, op)
				xs := randomInputs(uint64(w*10000+n), w, n)
				want := seqReduce(xs, op)
				bufs := make([][]float32, w)
				onRanks(t, w, func(r int, c Communicator) error {
					bufs[r] = clone(xs[r])
					return c.AllReduce(bufs[r], op)
				})
				for r := range w {
					sameBits(t, fmt.Sprintf("%s rank %d", name, r), bufs[r], want)
				}
			}
		}
	}
}

func TestReduceScatter(t *testing.T) {
	for _, w := range testWorlds {
		for _, n := range testSizes {
			for _, op := range []Op{Sum, Avg} {
				xs := randomInputs(uint64(w*777+n), w, w*n)
				want := seqReduce(xs, op)
				dsts := make([][]float32, w)
				onRanks(t, w, func(r int, c Communicator) error {
					dsts[r] = make([]float32, n)
					return c.ReduceScatter(dsts[r], xs[r], op)
				})
				for r := range w {
					sameBits(t, fmt.Sprintf("w%d n%d %s rank %d", w, n, op, r), dsts[r], want[r*n:(r+1)*n])
				}
			}
		}
	}
}

func TestReduceScatterInPlace(t *testing.T) {
	const w, n = 3, 1000
	xs := randomInputs(5, w, w*n)
	want := seqReduce(xs, Sum)
	bufs := make([][]float32, w)
	onRanks(t, w, func(r int, c Communicator) error {
		bufs[r] = clone(xs[r])
		return c.ReduceScatter(bufs[r][r*n:(r+1)*n], bufs[r], Sum)
	})
	for r := range w {
		sameBits(t, fmt.Sprintf("rank %d", r), bufs[r][r*n:(r+1)*n], want[r*n:(r+1)*n])
	}
}

func TestAllGather(t *testing.T) {
	for _, w := range testWorlds {
		for _, n := range testSizes {
			xs := randomInputs(uint64(w+n), w, n)
			var want []float32
			for r := range w {
				want = append(want, xs[r]...)
			}
			for _, inPlace := range []bool{false, true} {
				dsts := make([][]float32, w)
				onRanks(t, w, func(r int, c Communicator) error {
					dsts[r] = make([]float32, w*n)
					src := xs[r]
					if inPlace {
						src = dsts[r][r*n : (r+1)*n]
						copy(src, xs[r])
					}
					return c.AllGather(dsts[r], src)
				})
				for r := range w {
					sameBits(t, fmt.Sprintf("w%d n%d inplace=%v rank %d", w, n, inPlace, r), dsts[r], want)
				}
			}
		}
	}
}

func TestBroadcast(t *testing.T) {
	for _, w := range testWorlds {
		for _, n := range testSizes {
			root := (n + 1) % w
			xs := randomInputs(uint64(3*w+n), w, n)
			bufs := make([][]float32, w)
			onRanks(t, w, func(r int, c Communicator) error {
				bufs[r] = clone(xs[r])
				return c.Broadcast(bufs[r], root)
			})
			for r := range w {
				sameBits(t, fmt.Sprintf("w%d n%d root %d rank %d", w, n, root, r), bufs[r], xs[root])
			}
		}
	}
}

// TestRepeatedDeterministic reuses one group for a sequence of different
// collectives, checks each, and checks that a second run of the whole
// sequence gives the same bits.
func TestRepeatedDeterministic(t *testing.T) {
	const w, n = 4, 4099
	run := func() [][]float32 {
		out := make([][]float32, w)
		onRanks(t, w, func(r int, c Communicator) error {
			for it := range 5 {
				xs := randomInputs(uint64(it), w, n)
				buf := clone(xs[r])
				if err := c.AllReduce(buf, Avg); err != nil {
					return err
				}
				if err := testutil.DiffBits(fmt.Sprintf("iteration %d rank %d", it, r), buf, seqReduce(xs, Avg)); err != nil {
					return err
				}
				shard := make([]float32, n/w)
				if err := c.ReduceScatter(shard, buf[:w*(n/w)], Sum); err != nil {
					return err
				}
				full := make([]float32, w*len(shard))
				if err := c.AllGather(full, shard); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				out[r] = append(out[r], full...)
			}
			return nil
		})
		return out
	}
	a, b := run(), run()
	for r := range w {
		sameBits(t, fmt.Sprintf("rank %d vs rank 0", r), a[r], a[0])
		sameBits(t, fmt.Sprintf("run 2 rank %d", r), b[r], a[r])
	}
}

// TestStress hammers small collectives from many ranks; run it with -race.
func TestStress(t *testing.T) {
	const w, iters = 5, 200
	onRanks(t, w, func(r int, c Communicator) error {
		rng := rand.New(rand.NewPCG(1, 2)) // same stream on every rank
		for it := range iters {
			n := rng.IntN(13)
			buf := make([]float32, n)
			for i := range buf {
				buf[i] = float32(r*1000 + i)
			}
			if err := c.AllReduce(buf, Sum); err != nil {
				return err
			}
			for i, v := range buf {
				// sum over ranks of (r*1000 + i) is exact in float32 here
				if want := float32(1000*w*(w-1)/2 + w*i); v != want {
					return fmt.Errorf("iteration %d: element %d = %v, want %v", it, i, v, want)
				}
			}
			root := rng.IntN(w)
			b := []float32{float32(r)}
			if err := c.Broadcast(b, root); err != nil {
				return err
			}
			if b[0] != float32(root) {
				return fmt.Errorf("iteration %d: broadcast from %d gave %v", it, root, b[0])
			}
		}
		return nil
	})
}

func TestMismatchIsReportedOnEveryRank(t *testing.T) {
	type mismatchCase struct {
		call func(r int, c Communicator) error
		want string // in every rank's error
	}
	cases := map[string]mismatchCase{
		"length": {func(r int, c Communicator) error { return c.AllReduce(make([]float32, 3+r), Sum) },
			"rank 1 passed 4 elements, rank 0 passed 3"},
		"kind": {func(r int, c Communicator) error {
			if r == 0 {
				return c.AllReduce(make([]float32, 3), Sum)
			}
			return c.Broadcast(make([]float32, 3), 0)
		}, "rank 1 called Broadcast while rank 0 called AllReduce"},
		"op": {func(r int, c Communicator) error { return c.AllReduce(make([]float32, 3), Op(r)) },
			"rank 1 used op"},
		"root": {func(r int, c Communicator) error { return c.Broadcast(make([]float32, 3), r) },
			"rank 1 used root 1, rank 0 used root 0"},
		"src length": {func(r int, c Communicator) error {
			return c.ReduceScatter(make([]float32, 2), make([]float32, 5), Sum)
		}, "ReduceScatter"},
		"bad op":   {func(r int, c Communicator) error { return c.AllReduce(make([]float32, 3), Op(9)) }, "op"},
		"bad root": {func(r int, c Communicator) error { return c.Broadcast(make([]float32, 3), 2) }, "Broadcast root 2 outside [0,2)"},
	}
	for name, tc := range cases {
		g := NewGroup(2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Go(func() { errs[r] = tc.call(r, g.Comm(r)) })
		}
		wg.Wait()
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: rank %d got %v, want an error containing %q", name, r, err, tc.want)
			}
		}
		// The group stays usable after a reported mismatch.
		onRanksGroup(t, g, func(r int, c Communicator) error { return c.Barrier() })
	}
}

func onRanksGroup(t *testing.T, g *Group, fn func(r int, c Communicator) error) {
	t.Helper()
	errs := make([]error, g.WorldSize())
	var wg sync.WaitGroup
	for r := range errs {
		wg.Go(func() { errs[r] = fn(r, g.Comm(r)) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestBlockSplit(t *testing.T) {
	for _, w := range testWorlds {
		for _, n := range testSizes {
			next := 0
			for r := range w {
				lo, hi := block(n, w, r)
				if lo != next || hi < lo || hi-lo > n/w+1 || hi-lo < n/w {
					t.Fatalf("n=%d w=%d block %d = [%d,%d), previous ended at %d", n, w, r, lo, hi, next)
				}
				next = hi
			}
			if next != n {
				t.Fatalf("n=%d w=%d: blocks cover %d elements", n, w, next)
			}
		}
	}
}
