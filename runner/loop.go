package runner

import (
	"context"
	"math"
	"time"

	"resnetlab/report"
	"resnetlab/spec"
)

// loop trains from the current position to the last epoch.
func (j *job) loop(ctx context.Context) error {
	spe := j.info.StepsPerEpoch
	for j.epoch < j.spec.Epochs {
		for j.step < spe {
			if err := j.control(ctx); err != nil {
				return err
			}
			// A ResumeFrom that control served may have moved the position:
			// to the last epoch's end (nothing is left to train, as for a
			// fresh --resume of it) or past the steps of this epoch.
			if j.epoch >= j.spec.Epochs || j.step >= spe {
				break
			}
			// The rate is read at every step, not once per epoch: that
			// resume may have moved the run to an epoch of another rate.
			lr := float32(j.sched.LR(j.epoch))
			t0 := time.Now()
			if err := j.trainStep(lr); err != nil {
				return err
			}
			dt := time.Since(t0)
			j.afterStep(dt, lr)
		}
		if j.step < spe {
			continue
		}
		if err := j.endEpoch(); err != nil {
			return err
		}
	}
	return nil
}

// endEpoch evaluates, records, publishes and checkpoints a finished epoch.
func (j *job) endEpoch() error {
	e := j.epoch + 1
	r := j.result
	acc := math.NaN() // not evaluated this epoch (eval_every): null in the JSON
	if every := j.spec.EvalEvery; e == j.spec.Epochs || (every > 0 && e%every == 0) {
		a, perClass, err := j.evaluate()
		if err != nil {
			return err
		}
		acc, r.FinalTestAcc, r.PerClassAcc = a, a, perClass
		r.BestTestAcc = max(r.BestTestAcc, a)
	}
	er := report.EpochResult{Epoch: e, TestAcc: acc, Seconds: j.epochTime.Seconds()}
	if j.epochSteps > 0 {
		er.Loss = j.epochLoss / float64(j.epochSteps)
	}
	r.EpochResults = append(r.EpochResults, er)
	r.TrainSeconds += er.Seconds
	j.trainImages += j.epochSteps * j.spec.BatchSize * j.cell.WorldSize
	j.emit(EpochDone{Run: j.info.ID, Epoch: e, Loss: er.Loss, TestAcc: acc, Seconds: er.Seconds, LR: j.sched.LR(j.epoch)})
	j.publishMemory()
	j.geminiResult()
	j.epoch, j.step = e, 0
	j.epochLoss, j.epochSteps, j.epochTime = 0, 0, 0
	iv := j.spec.Interval
	if iv > 0 && (e%iv == 0 || e == j.spec.Epochs) {
		return j.checkpoint()
	}
	return nil
}

// evalBatch is the evaluation's batch size: the reference's 128, but at
// most the training batch under a Gemini device budget, whose planning
// holds for the activations of a training batch: a larger evaluation batch
// would take the rank over its budget.
func (j *job) evalBatch() int {
	if j.cell.Plugin == spec.PluginGemini && j.spec.Gemini.DeviceBudget > 0 {
		return min(EvalBatch, j.spec.BatchSize)
	}
	return EvalBatch
}

// evaluate scores rank 0's model on the test set (batch 128, eval mode).
// Every rank holds the same weights and running statistics.
func (j *job) evaluate() (acc float64, perClass []float64, err error) {
	// Every rank runs it: Gemini gathers its sharded chunks collectively.
	err = j.pool.do(func(r int) error {
		rs := j.ranks[r]
		a, pc := evaluateModel(rs.eng.Model(), rs.be, j.test, rs.devTest, j.precision, j.evalBatch(), &stepInput{rs.x, &rs.in})
		if r == 0 {
			acc, perClass = a, pc
		}
		return nil
	})
	j.dropGraphs() // the evaluation's batch size may have moved the activations
	return acc, perClass, err
}

// publishMemory sends every rank's memory accounting: this process's
// ranks as events, or, on the other ranks of a world, to rank 0 (which
// forwards them: rankreport.go). The peaks it sends are the run's, and
// the result records the same: a Gemini engine restarts the backend's
// peak every step, so its step peaks are taken in too.
func (j *job) publishMemory() {
	j.memAt = time.Now()
	r := j.result
	for i, rs := range j.ranks {
		ms := rs.be.MemStats()
		g := j.globalRank(i)
		rs.peakDev = max(rs.peakDev, ms.TotalPeak, ms.Total())
		if i < len(j.gem) {
			rs.peakDev = max(rs.peakDev, j.gem[i].total.PeakDeviceBytes)
		}
		ev := MemoryUsage{Run: j.info.ID, Rank: g, Epoch: j.epoch, Step: j.step, DevicePeak: rs.peakDev, Capacity: ms.Capacity,
			DeviceIsHost: rs.be.Name() == "cpu"}
		copy(ev.Device[:], ms.InUse[:])
		cats, pageable, pinned, hostPeak := j.hostMemory(rs)
		rs.peakHost = max(rs.peakHost, hostPeak)
		ev.HostPageable, ev.HostPinned, ev.HostPeak = pageable, pinned, rs.peakHost
		copy(ev.Host[:], cats[:])
		if j.cell.Plugin == spec.PluginGemini {
			ev.Budget = j.spec.Gemini.DeviceBudget
		}
		r.PeakDeviceBytes[g] = max(r.PeakDeviceBytes[g], ev.DevicePeak)
		r.PeakHostBytes[g] = max(r.PeakHostBytes[g], ev.HostTotalPeak())
		if j.records() {
			j.emit(ev)
		} else {
			j.reportMemory(ev)
		}
	}
	j.collectReports(false)
}
