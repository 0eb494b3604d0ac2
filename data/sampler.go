package data

import "fmt"

// EpochIndices returns the sample indices rank takes in epoch, with torch
// DistributedSampler(drop_last=True) semantics: one global permutation of
// 0..n-1 per (seed, epoch) (identity when !shuffle), of which rank takes
// perm[rank::world], truncated to n/world so every rank has the same count.
// Because the permutation ignores world, the ranks' shares interleave into
// the world=1 order.
func EpochIndices(n int, seed uint64, epoch int, shuffle bool, rank, world int) []int {
	return epochIndicesInto(make([]int, n), seed, epoch, shuffle, rank, world)
}

// epochIndicesInto is EpochIndices writing into buf (len n), reusing it.
func epochIndicesInto(buf []int, seed uint64, epoch int, shuffle bool, rank, world int) []int {
	if world < 1 || rank < 0 || rank >= world {
		panic(fmt.Sprintf("data: rank %d of world %d: expected 0 <= rank < world", rank, world))
	}
	n := len(buf)
	for i := range buf {
		buf[i] = i
	}
	if shuffle {
		r := rng{hash(seed, domainPerm, uint64(epoch))}
		for i := n - 1; i > 0; i-- { // Fisher-Yates
			j := r.intn(i + 1)
			buf[i], buf[j] = buf[j], buf[i]
		}
	}
	// In place: source position rank+world*i >= i, so nothing is overwritten early.
	m := n / world
	for i := 0; i < m; i++ {
		buf[i] = buf[rank+world*i]
	}
	return buf[:m]
}
