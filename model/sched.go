package model

import "math"

// MultiStepLR is torch.optim.lr_scheduler.MultiStepLR stepped once per
// epoch: after e scheduler steps (during 0-based epoch e) the rate is Base
// times Gamma for every milestone <= e.
type MultiStepLR struct {
	Base       float64
	Milestones []int
	Gamma      float64
}

// ReferenceSchedule is the recipe's schedule: milestones [20,40,60,80],
// gamma 1/3.
func ReferenceSchedule(base float64) MultiStepLR {
	return MultiStepLR{Base: base, Milestones: []int{20, 40, 60, 80}, Gamma: 1.0 / 3}
}

// LR is the learning rate used during the epoch after epochsDone epochs.
// PyTorch multiplies the current rate by gamma^count at each milestone
// (chainable form), so the same is done here milestone by milestone in
// ascending order to get identical float64 values.
func (s MultiStepLR) LR(epochsDone int) float64 {
	lr := s.Base
	for e := 0; e <= epochsDone; e++ {
		n := 0
		for _, m := range s.Milestones {
			if m == e {
				n++
			}
		}
		if n > 0 {
			lr *= math.Pow(s.Gamma, float64(n))
		}
	}
	return lr
}
