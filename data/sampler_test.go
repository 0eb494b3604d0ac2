package data

import (
	"slices"
	"testing"
)

func TestEpochIndicesPermutation(t *testing.T) {
	const n = 1000
	p := EpochIndices(n, 9, 0, true, 0, 1)
	if !isPermutation(p, n) {
		t.Fatal("world=1 shuffle is not a permutation of 0..n-1")
	}
	if slices.Equal(p, EpochIndices(n, 9, 1, true, 0, 1)) || slices.Equal(p, EpochIndices(n, 10, 0, true, 0, 1)) {
		t.Fatal("another epoch or seed gave the same order")
	}
	if !slices.Equal(p, EpochIndices(n, 9, 0, true, 0, 1)) {
		t.Fatal("same seed and epoch gave another order")
	}
	if fixed := countFixed(p); fixed > 10 {
		t.Fatalf("%d fixed points in a shuffle of %d: not shuffled", fixed, n)
	}
	if id := EpochIndices(n, 9, 3, false, 0, 1); countFixed(id) != n || len(id) != n {
		t.Fatal("without shuffle the order is not 0..n-1")
	}
}

func isPermutation(p []int, n int) bool {
	s := slices.Sorted(slices.Values(p))
	for i, v := range s {
		if v != i {
			return false
		}
	}
	return len(p) == n
}

func countFixed(p []int) (c int) {
	for i, v := range p {
		if i == v {
			c++
		}
	}
	return c
}

// TestEpochIndicesRanks checks torch's DistributedSampler(drop_last=True)
// rule against a direct slicing of the world=1 order: rank r gets
// perm[r::world][:n/world].
func TestEpochIndicesRanks(t *testing.T) {
	for _, n := range []int{10, 1001, 1000} {
		for world := 1; world <= 5; world++ {
			for _, shuffle := range []bool{false, true} {
				full := EpochIndices(n, 4, 2, shuffle, 0, 1)
				seen := map[int]bool{}
				for rank := 0; rank < world; rank++ {
					var want []int
					for i := rank; i < n; i += world {
						want = append(want, full[i])
					}
					want = want[:n/world]
					got := EpochIndices(n, 4, 2, shuffle, rank, world)
					if !slices.Equal(got, want) {
						t.Fatalf("n=%d world=%d rank=%d shuffle=%v: got %v..., want %v...", n, world, rank, shuffle, got[:min(5, len(got))], want[:min(5, len(want))])
					}
					for _, v := range got {
						if seen[v] {
							t.Fatalf("n=%d world=%d: index %d on two ranks", n, world, v)
						}
						seen[v] = true
					}
				}
				if len(seen) != n/world*world {
					t.Fatalf("n=%d world=%d: %d distinct indices, want %d", n, world, len(seen), n/world*world)
				}
			}
		}
	}
}
