package engine

// ScalerConfig configures a dynamic loss scaler. torch's GradScaler is
// Hysteresis 1 with no floor or cap; ColossalAI's DynamicGradScaler adds a
// hysteresis of 2 and clamps the scale to [MinScale, MaxScale].
type ScalerConfig struct {
	InitialScale   float64
	GrowthFactor   float64
	BackoffFactor  float64
	GrowthInterval int     // clean steps before the scale grows
	Hysteresis     int     // overflowing steps before the scale backs off
	MinScale       float64 // 0 = no floor
	MaxScale       float64 // 0 = no cap
}

// LossScaler is the dynamic loss scaler of mixed-precision training. Every
// rank keeps its own copy; they stay identical because every rank feeds it
// the same (all-reduced) overflow flag.
type LossScaler struct {
	Cfg       ScalerConfig
	Scale     float64
	GoodSteps int // clean steps since the last growth or overflow
	Overflows int // overflowing steps since the last backoff or growth
	SkipCount int // steps skipped so far, for reporting
}

// NewLossScaler starts at cfg.InitialScale.
func NewLossScaler(cfg ScalerConfig) *LossScaler {
	if cfg.Hysteresis < 1 {
		cfg.Hysteresis = 1
	}
	return &LossScaler{Cfg: cfg, Scale: cfg.InitialScale}
}

// Update records one step's outcome. An overflowing step is always skipped;
// the scale backs off after Hysteresis overflows and grows after
// GrowthInterval clean steps in a row.
func (s *LossScaler) Update(overflow bool) {
	if overflow {
		s.SkipCount++
		s.GoodSteps = 0
		s.Overflows++
		if s.Overflows >= s.Cfg.Hysteresis {
			s.Scale *= s.Cfg.BackoffFactor
			if s.Cfg.MinScale > 0 && s.Scale < s.Cfg.MinScale {
				s.Scale = s.Cfg.MinScale
			}
			s.Overflows = 0
		}
		return
	}
	s.GoodSteps++
	if s.GoodSteps >= s.Cfg.GrowthInterval {
		s.Scale *= s.Cfg.GrowthFactor
		if s.Cfg.MaxScale > 0 && s.Scale > s.Cfg.MaxScale {
			s.Scale = s.Cfg.MaxScale
		}
		s.GoodSteps = 0
		s.Overflows = 0
	}
}
