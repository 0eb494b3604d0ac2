package engine

import (
	"fmt"

	"resnetlab/comm"
	"resnetlab/kernels"
)

// How a rank's gradient buckets are reduced:
//
//   - CPU ranks (HostTensorComm): a complete bucket's collective goes to a
//     comm goroutine (commQueue) and runs while this rank's backward goes
//     on; the step waits for all of them before the overflow check and
//     Adam. The host collectives sum in rank order whatever the bucket
//     order, so the result is bit-identical to reducing after backward.
//   - Device ranks (DeviceComm, NCCLTensorComm, StagedComm): the backend
//     must be used from the rank's own thread (a CUDA context is bound per
//     OS thread), so the collective is called inline from the hook.
//     DeviceComm and NCCL enqueue it on the rank's compute stream, so it
//     starts early but does not run concurrently with the rest of
//     backward; true overlap on the GPU needs a separate comm stream with
//     events, which is not done. DeviceComm's host side only waits for the
//     peers to reach the same bucket (two barriers), never for the GPU.
//     StagedComm's host reduction blocks the rank for its duration.
//   - EngineConfig.NoOverlap: every bucket after backward, in bucket order
//     (the path before overlap; same results).

// backward runs the model's backward for micro-batch i of n and hands
// every complete gradient bucket to bucketReady.
func (e *Engine) backward(dlogits *kernels.Tensor, i, n int) {
	e.micro, e.nMicro = i, n
	if e.red == nil {
		e.model.Backward(dlogits)
		for k := range e.lay.buckets {
			e.bucketReady(k)
		}
		return
	}
	e.red.begin()
	e.model.Backward(dlogits)
	e.red.end()
}

// bucketReady collects bucket k's gradients of this micro-batch into the
// flat buffer and, on the last micro-batch, launches its reduction.
func (e *Engine) bucketReady(k int) {
	if e.direct != nil && e.direct.on {
		return // Adam reads the model's gradients where they are
	}
	if e.zero2() {
		e.reduceScatterBucket(k)
		return
	}
	e.collectBucket(k)
	if e.micro < e.nMicro-1 || e.lay.world == 1 {
		return
	}
	lo, hi := e.lay.bucket(k)
	b := kernels.View(e.grad, lo, hi-lo)
	e.launch(k, func() error { return e.comm.AllReduce(b, comm.Avg) })
}

func (e *Engine) zero2() bool { return e.sharded && e.cfg.ZeroStage == 2 }

// collectBucket moves micro-batch e.micro's gradients of bucket k into the
// flat gradient buffer, summing over micro-batches. fp32 DDP's gradients
// already are views of it, so only accumulation needs a side buffer there.
func (e *Engine) collectBucket(k int) {
	lo, hi := e.lay.bucket(k)
	i, n := e.micro, e.nMicro
	full := kernels.View(e.grad, lo, hi-lo)
	if e.cfg.Precision != kernels.F32 {
		if i == 0 {
			e.lay.gather(e.be, e.params, grads, full, lo, hi)
			return
		}
		acc := kernels.View(e.accumBuffer(), lo, hi-lo)
		e.lay.gather(e.be, e.params, grads, acc, lo, hi)
		e.be.Add(full, full, acc)
		return
	}
	if n == 1 {
		return
	}
	acc := kernels.View(e.accumBuffer(), lo, hi-lo)
	switch {
	case i == 0:
		e.be.Copy(acc, full)
	case i < n-1:
		e.be.Add(acc, acc, full)
	default:
		e.be.Add(full, full, acc)
	}
}

// accumBuffer is the side buffer of gradient accumulation, made on first use.
func (e *Engine) accumBuffer() *kernels.Tensor {
	if e.acc == nil {
		e.acc = e.alloc(kernels.CatGrads, e.lay.padded())
	}
	return e.acc
}

// reduceScatterBucket (ZeRO-2) gathers bucket k's gradients into a staging
// bucket and reduce-scatters it into this rank's gradient shard. With
// overlap there are two staging buckets, so one is filled while the other's
// collective runs; a stage is reused only once its collective is done.
func (e *Engine) reduceScatterBucket(k int) {
	l := e.lay
	s := e.nextStage
	e.nextStage = (s + 1) % len(e.stages)
	if j := e.stageJob[s]; j != nil {
		<-j.done
	}
	stage := e.stages[s]
	lo, hi := l.bucket(k)
	e.fillPadding(stage, lo, hi)
	l.gather(e.be, e.params, grads, stage, lo, hi)
	dst := kernels.View(e.grad, k*l.block, l.block)
	if l.world == 1 { // the identity, as a backend op: capturable (graph.go)
		e.be.Copy(dst, stage)
		return
	}
	e.stageJob[s] = e.launch(k, func() error { return e.comm.ReduceScatter(dst, stage, comm.Avg) })
}

// fillPadding zeroes a staging bucket whose tail lies past the last
// parameter, so stale values of an earlier bucket never reach the shard.
func (e *Engine) fillPadding(stage *kernels.Tensor, lo, hi int) {
	if hi > e.lay.n {
		e.be.Fill(stage, 0)
	}
}

// launch starts bucket k's collective: on the comm goroutine for CPU ranks
// with overlap, here otherwise. After a failure in this step nothing more
// runs.
func (e *Engine) launch(k int, run func() error) *bucketJob {
	j := &bucketJob{k: k, run: run, done: make(chan struct{})}
	if e.trace != nil {
		e.trace(fmt.Sprintf("launch %d", k))
	}
	if e.async {
		if e.queue == nil {
			e.queue = newCommQueue(e.lay.buckets, e.trace)
		}
		e.queue.jobs <- j
		return j
	}
	if e.stepErr == nil {
		if err := run(); err != nil {
			e.stepErr = fmt.Errorf("gradient bucket %d: %w", k, err)
		}
		if e.trace != nil {
			e.trace(fmt.Sprintf("reduced %d", k))
		}
	}
	close(j.done)
	return j
}

// finishReduction waits for every collective launched in this step and
// returns the first error.
func (e *Engine) finishReduction() error {
	err := e.stepErr
	e.stepErr = nil
	if e.queue != nil {
		if qerr := e.queue.wait(); err == nil {
			err = qerr
		}
		e.queue = nil
	}
	clear(e.stageJob)
	e.nextStage = 0
	return err
}

// abandonReduction closes a queue left open by a panic in backward without
// waiting: its collectives fail once the panic aborts the group.
func (e *Engine) abandonReduction() {
	if e.queue != nil {
		close(e.queue.jobs)
		e.queue = nil
	}
}
