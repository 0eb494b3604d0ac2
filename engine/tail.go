package engine

import (
	"fmt"

	"resnetlab/comm"
	"resnetlab/kernels"
	"resnetlab/model"
)

// Tail is the end of a training step that every plugin shares, so that the
// engines (DDP, ZeRO) and Gemini take the same decisions in the same order:
// the all-ranks overflow vote, Adam's hyper-parameters and step count, the
// dynamic loss scaler and the batch-norm buffer broadcast. A plugin owns
// only what differs: where its gradients and optimizer state live and how
// the updated weights reach the model.
type Tail struct {
	Scaler *LossScaler // nil without loss scaling (fp32, bf16)
	Steps  int         // Adam steps taken (skipped steps excluded)

	be     kernels.Backend
	comm   comm.DeviceCommunicator
	model  *model.ResNet
	flag   *kernels.Tensor // one fp32 element on be, for the vote
	prefix string          // the plugin's error prefix
}

// NewTail returns the tail of a plugin running m on be. flag is a one-element
// fp32 tensor on be that the plugin allocated (and accounts for); the loss
// scaler exists only for fp16, as in ColossalAI.
func NewTail(be kernels.Backend, dc comm.DeviceCommunicator, m *model.ResNet, precision kernels.DType,
	scaler ScalerConfig, flag *kernels.Tensor, prefix string) Tail {
	t := Tail{be: be, comm: dc, model: m, flag: flag, prefix: prefix}
	if precision == kernels.F16 {
		t.Scaler = NewLossScaler(scaler)
	}
	return t
}

// Scale is the factor the loss is multiplied by this step (1 without a
// scaler).
func (t *Tail) Scale() float32 {
	if t.Scaler == nil {
		return 1
	}
	return float32(t.Scaler.Scale)
}

// Vote returns whether any rank found a non-finite gradient (bad is this
// rank's finding): every rank then skips the step together.
func (t *Tail) Vote(bad bool) (bool, error) {
	if t.comm.WorldSize() == 1 {
		return bad, nil
	}
	v := float32(0)
	if bad {
		v = 1
	}
	t.be.Fill(t.flag, v)
	if err := t.comm.AllReduce(t.flag, comm.Sum); err != nil {
		return false, fmt.Errorf("%soverflow vote: %w", t.prefix, err)
	}
	var h [1]float32
	t.be.Download(t.flag, h[:])
	return h[0] > 0, nil
}

// AdamParams are Adam's hyper-parameters for the next step: HybridAdam's
// betas and eps (model.NewAdam), lr, and gradients unscaled by 1/scale.
func (t *Tail) AdamParams(lr, scale float32) kernels.AdamParams {
	a := model.NewAdam()
	return kernels.AdamParams{LR: lr, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps, WeightDecay: a.WeightDecay,
		Step: t.Steps, GradScale: 1 / scale}
}

// Finish ends a step whose vote said overflow or not: without overflow it
// counts the step and calls update with Adam's hyper-parameters (the
// plugin's Adam and its publishing of the weights); then done (may be nil:
// the plugin's clean-up either way), the scaler's update and the buffer
// broadcast.
func (t *Tail) Finish(overflow bool, lr, scale float32, update func(kernels.AdamParams) error, done func()) error {
	if !overflow {
		t.Steps++
		if err := update(t.AdamParams(lr, scale)); err != nil {
			return err
		}
	}
	if done != nil {
		done()
	}
	if t.Scaler != nil {
		t.Scaler.Update(overflow)
	}
	return t.syncBuffers()
}

// syncBuffers gives every rank rank 0's batch-norm running statistics, as
// torch DDP's broadcast_buffers does before each forward, so evaluation and
// checkpoints see one model whichever rank they run on.
func (t *Tail) syncBuffers() error {
	if t.comm.WorldSize() == 1 {
		return nil
	}
	for _, b := range t.model.Buffers() {
		if err := t.comm.Broadcast(b.T, 0); err != nil {
			return fmt.Errorf("%sbroadcast of %s: %w", t.prefix, b.Name, err)
		}
	}
	return nil
}
