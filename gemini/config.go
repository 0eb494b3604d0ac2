package gemini

import (
	"fmt"

	"resnetlab/engine"
	"resnetlab/kernels"
)

// Placement policies.
const (
	Static = "static"
	Auto   = "auto"
)

// Config configures one rank's Gemini. Zero fractions mean zero (the
// runner passes ColossalAI's defaults: ShardParamFrac 1, GPUMarginMemRatio 0.8).
type Config struct {
	Precision kernels.DType // F16 or BF16 compute; master weights are fp32
	Scaler    engine.ScalerConfig
	Placement string // Static ("" too) or Auto
	// DeviceBudget is the bytes the rank's backend may hold (0 = unlimited):
	// its MemStats().Total() stays below it from the end of New on.
	DeviceBudget int64
	// ChunkElems is the chunk capacity in elements (0 = search one).
	ChunkElems int
	// ShardParamFrac: fraction of the chunk bytes sharded over ranks
	// (ZeRO-3); the first chunks beyond it stay replicated on every rank.
	ShardParamFrac float64
	// OffloadOptimFrac, OffloadParamFrac (static): fraction of the chunk
	// bytes, first chunks first, whose optimizer state / parameters live
	// in host memory.
	OffloadOptimFrac, OffloadParamFrac float64
	// GPUMarginMemRatio (auto): the fraction of the device memory left
	// after the warm-up peak and the parameters that may hold optimizer
	// chunks (Adam runs on the device for those, on the host for the rest).
	GPUMarginMemRatio float64
	// MaxPrefetch (ColossalAI's max_prefetch): after warm-up, before and
	// after each operator, the next MaxPrefetch chunks in the traced order
	// of use are uploaded ahead (asynchronously, on a copy stream where the
	// backend has one) as far as the device budget allows. 0 = off: chunks
	// are fetched when their operator starts.
	MaxPrefetch int
	WarmupSteps int       // steps traced before the statistics are used (default 1)
	OnEvent     func(any) // receives ChunksEvent, MoveEvent, StateChange and MemStatsEvent; may be nil
}

func (c *Config) normalise() error {
	if c.Precision != kernels.F16 && c.Precision != kernels.BF16 {
		return fmt.Errorf("gemini trains in fp16 or bf16 with fp32 master weights, not %s", c.Precision)
	}
	if c.Placement == "" {
		c.Placement = Static
	}
	if c.Placement != Static && c.Placement != Auto {
		return fmt.Errorf("gemini: placement %q (want %q or %q)", c.Placement, Static, Auto)
	}
	if c.DeviceBudget < 0 || c.ChunkElems < 0 || c.WarmupSteps < 0 || c.MaxPrefetch < 0 {
		return fmt.Errorf("gemini: device budget %d, chunk elems %d, warm-up steps %d, max prefetch %d: want >= 0",
			c.DeviceBudget, c.ChunkElems, c.WarmupSteps, c.MaxPrefetch)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"shard_param_frac", c.ShardParamFrac}, {"offload_optim_frac", c.OffloadOptimFrac},
		{"offload_param_frac", c.OffloadParamFrac}, {"gpu_margin_mem_ratio", c.GPUMarginMemRatio}} {
		if f.v < 0 || f.v > 1 {
			return fmt.Errorf("gemini: %s = %g (want a fraction in [0, 1])", f.name, f.v)
		}
	}
	if c.WarmupSteps == 0 {
		c.WarmupSteps = 1
	}
	return nil
}
