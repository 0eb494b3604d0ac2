package engine

import (
	"resnetlab/kernels"
	"resnetlab/model"
)

// layout places a model's parameters, in state-dict order, end to end in
// one flat fp32 index space, cut into buckets of world*block elements.
// Buckets are the unit of gradient communication (DDP's ~25 MB buckets);
// ZeRO gives rank r block r of every bucket, so a reduce-scatter of a bucket
// lands exactly on the owner's shard and an all-gather rebuilds it.
type layout struct {
	world, rank int
	offs        []int // flat offset of each parameter
	n           int   // elements of all parameters
	block       int   // elements per rank per bucket
	buckets     int
}

func newLayout(params []*model.Param, world, rank, bucketElems int) *layout {
	l := &layout{world: world, rank: rank}
	for _, p := range params {
		l.offs = append(l.offs, l.n)
		l.n += p.W.Len()
	}
	if bucketElems <= 0 || bucketElems > l.n {
		bucketElems = l.n
	}
	l.block = (bucketElems + world - 1) / world
	l.buckets = (l.n + l.bucketLen() - 1) / l.bucketLen()
	return l
}

func (l *layout) bucketLen() int { return l.world * l.block }

// padded is the flat length: whole buckets.
func (l *layout) padded() int { return l.buckets * l.bucketLen() }

// shardLen is the elements one rank owns under ZeRO.
func (l *layout) shardLen() int { return l.buckets * l.block }

// bucket is the flat range [lo, hi) of bucket k.
func (l *layout) bucket(k int) (lo, hi int) { return k * l.bucketLen(), (k + 1) * l.bucketLen() }

// owned is the flat offset of this rank's block of bucket k.
func (l *layout) owned(k int) int { return k*l.bucketLen() + l.rank*l.block }

// each calls fn for every parameter overlapping the flat range [lo, hi)
// with the overlap: elements [pOff, pOff+n) of parameter i sit at flat
// offset flat.
func (l *layout) each(lo, hi int, fn func(i, pOff, flat, n int)) {
	for i, off := range l.offs {
		end := l.n
		if i+1 < len(l.offs) {
			end = l.offs[i+1]
		}
		a, b := max(off, lo), min(end, hi)
		if a < b {
			fn(i, a-off, a, b-a)
		}
	}
}

// gather copies the parameters' tensors (chosen by pick) overlapping
// [lo, hi) into dst, whose element 0 is flat offset lo.
func (l *layout) gather(be kernels.Backend, params []*model.Param, pick func(*model.Param) *kernels.Tensor, dst *kernels.Tensor, lo, hi int) {
	l.each(lo, hi, func(i, pOff, flat, n int) {
		src := flatView(pick(params[i]))
		be.Copy(kernels.View(dst, flat-lo, n), kernels.View(src, pOff, n))
	})
}

// scatter copies src (element 0 = flat offset lo) into the parameters'
// tensors (chosen by pick) overlapping [lo, hi).
func (l *layout) scatter(be kernels.Backend, params []*model.Param, pick func(*model.Param) *kernels.Tensor, src *kernels.Tensor, lo, hi int) {
	l.each(lo, hi, func(i, pOff, flat, n int) {
		dst := flatView(pick(params[i]))
		be.Copy(kernels.View(dst, pOff, n), kernels.View(src, flat-lo, n))
	})
}

func flatView(t *kernels.Tensor) *kernels.Tensor { return kernels.View(t, 0, t.Len()) }

func weights(p *model.Param) *kernels.Tensor { return p.W }
func grads(p *model.Param) *kernels.Tensor   { return p.G }
