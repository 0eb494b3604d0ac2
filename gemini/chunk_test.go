package gemini

import (
	"math/rand/v2"
	"testing"

	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

func TestPackFollowsFirstUse(t *testing.T) {
	be := cpu.New()
	m := model.NewResNet18(be, model.Config{Width: 4, InChannels: 3, NumClasses: 10, DType: kernels.F16, Seed: 1})
	defer m.Free()
	params := m.Params()
	caps := chunkCapacities(params, 0, 2)
	pk, err := pack(params, caps)
	if err != nil {
		t.Fatal(err)
	}
	// Every parameter sits whole inside one chunk of its dtype, chunks are
	// filled in parameter order, and chunk ids follow first use.
	next := map[*chunk]int{}
	lastChunk := map[kernels.DType]int{kernels.F16: -1, kernels.F32: -1}
	firstUse := map[int]int{}
	for i, p := range params {
		ti := pk.tensors[i]
		c := ti.c
		if ti.p != p || c.dt != p.W.DType || ti.n != p.W.Len() {
			t.Fatalf("param %s placed as %+v", p.Name, ti)
		}
		if ti.off != next[c] || ti.off+ti.n > c.size || c.size != caps[c.dt] || c.size%2 != 0 {
			t.Fatalf("param %s at [%d,%d) of chunk %d (size %d, expected offset %d)", p.Name, ti.off, ti.off+ti.n, c.id, c.size, next[c])
		}
		next[c] += ti.n
		if c.id < lastChunk[c.dt] {
			t.Fatalf("param %s goes back to chunk %d after chunk %d", p.Name, c.id, lastChunk[c.dt])
		}
		if c.id > lastChunk[c.dt] && lastChunk[c.dt] >= 0 {
			prev := pk.chunks[lastChunk[c.dt]]
			if prev.used+ti.n <= prev.size {
				t.Fatalf("param %s opened chunk %d although chunk %d had room", p.Name, c.id, prev.id)
			}
		}
		lastChunk[c.dt] = c.id
		if _, ok := firstUse[c.id]; !ok {
			firstUse[c.id] = i
		}
	}
	for id := 1; id < len(pk.chunks); id++ {
		if firstUse[id] < firstUse[id-1] {
			t.Fatalf("chunk %d is first used before chunk %d", id, id-1)
		}
	}
	if len(pk.chunks) < 3 {
		t.Fatalf("only %d chunks: the test needs several", len(pk.chunks))
	}
	if _, err := pack(params, map[kernels.DType]int{kernels.F16: 100, kernels.F32: 100}); err == nil {
		t.Fatal("a capacity below the largest parameter must be an error")
	}
}

// bruteWaste packs by building explicit chunk lists.
func bruteWaste(sizes []int, c int) int {
	var chunks [][]int
	for _, s := range sizes {
		if len(chunks) == 0 || sum(chunks[len(chunks)-1])+s > c {
			chunks = append(chunks, nil)
		}
		chunks[len(chunks)-1] = append(chunks[len(chunks)-1], s)
	}
	waste := 0
	for _, ch := range chunks {
		waste += c - sum(ch)
	}
	return waste
}

func TestSearchChunkElemsMinimisesWaste(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		sizes := make([]int, 3+rng.IntN(20))
		largest := 0
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(300)
			largest = max(largest, sizes[i])
		}
		got := searchChunkElems(sizes)
		best, bestC := int(^uint(0)>>1), 0
		for c := largest; c <= 2*largest; c++ { // exhaustive (the search steps by 1 below 512)
			if w := bruteWaste(sizes, c); w < best {
				best, bestC = w, c
			}
		}
		if got != bestC {
			t.Fatalf("trial %d: sizes %v: search chose %d (waste %d), best is %d (waste %d)",
				trial, sizes, got, bruteWaste(sizes, got), bestC, best)
		}
	}
}
