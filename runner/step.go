package runner

import (
	"errors"
	"fmt"
	"math"
	"time"

	"resnetlab/engine"
	"resnetlab/gemini"
	"resnetlab/kernels"
	"resnetlab/model"
)

// One training step: every rank trains on its batch (trainStep), then the
// driver records and publishes the step (afterStep). The loop around it is
// loop.go.

// trainStep runs step j.step of epoch j.epoch on every rank.
func (j *job) trainStep(lr float32) error {
	epoch, step := j.epoch, j.step
	return j.pool.do(func(r int) error {
		rs := j.ranks[r]
		if rs.dev != nil {
			rs.dev.batch(rs.loader, epoch, step, rs.x, rs.yh)
		} else {
			rs.loader.Batch(epoch, step, rs.xh, rs.yh)
			rs.in.upload(rs.be, rs.x, rs.xh)
		}
		rs.be.Upload(rs.y, rs.yh)
		st, err := rs.eng.Step(rs.x, rs.y, lr)
		rs.stats = st
		if errors.Is(err, engine.ErrCapture) {
			return fmt.Errorf("%w (cuda_graphs = true in %s: set it to false to train eagerly)", err, j.spec.File)
		}
		if be := (*gemini.BudgetError)(nil); errors.As(err, &be) {
			return j.budgetError(be)
		}
		if err != nil {
			return err
		}
		if j.precision == kernels.F32 && !finite(st.Loss) {
			return fmt.Errorf("loss is %v at epoch %d step %d (fp32 has no loss scaler to skip it): %s",
				st.Loss, epoch+1, step+1, firstNonFinite(rs.eng.Model()))
		}
		return nil
	})
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// firstNonFinite names the first layer (in forward order) whose weights
// or gradients hold inf or NaN.
func firstNonFinite(m *model.ResNet) string {
	be := m.Backend()
	for _, p := range m.Params() {
		if p.W == nil { // a Gemini chunk that is not on the device
			continue
		}
		if be.NonFinite([]*kernels.Tensor{p.W}) {
			return "first non-finite weights: " + p.Name
		}
		if p.G != nil && be.NonFinite([]*kernels.Tensor{p.G}) {
			return "first non-finite gradient: " + p.Name
		}
	}
	return "weights and gradients are finite: the input or the loss overflowed"
}

// afterStep records and publishes one step.
func (j *job) afterStep(dt time.Duration, lr float32) {
	st := j.ranks[0].stats
	j.step++
	j.epochSteps++
	j.trained++
	j.epochLoss += float64(st.Loss)
	j.epochTime += dt
	images := j.spec.BatchSize * j.cell.WorldSize
	j.emit(StepDone{Run: j.info.ID, Epoch: j.epoch + 1, Step: j.step, Steps: j.info.StepsPerEpoch,
		Loss: float64(st.Loss), LossScale: st.LossScale, Skipped: st.Skipped, StepTime: dt,
		ImagesPerSec: float64(images) / dt.Seconds()})
	j.estimate(dt)
	if time.Since(j.memAt) > time.Second { // live memory pane, about once a second
		j.publishMemory()
	}
	j.collectReports(false) // the other processes' reports, as they come
}
