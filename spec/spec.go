package spec

import "resnetlab/engine"

// Spec is a parsed and validated experiment spec: the settings shared by
// every run plus the grid of runs (see Cells).
//
// # Experiment spec schema (TOML)
//
// A spec file holds top-level settings, optional tables that tune one plugin,
// and the list of runs (a [grid] product and/or explicit [[run]] tables).
// Every key is optional; the defaults reproduce ColossalAI's ResNet example.
// Unknown keys, wrong types and out-of-range values are errors that name the
// file, line and key: "zero.toml:11: key `epochs`: 0 is out of range (want
// an integer from 1 to 100000)".
// Keys are case-sensitive.
//
//	name          string   file name without .toml  spec name, used in run ids and {name}
//	epochs        int      80          epochs to train (>= 1)
//	batch_size    int      100         images per step per rank (>= 1)
//	dataset       string   "cifar10"   "cifar10" | "fashion-mnist" | "synthetic"
//	data_dir      string   $DATA or "./data"   where data sets live
//	in_channels   int      3           image channels fed to the model: 3, or 1 for
//	                                   fashion-mnist/synthetic (cifar10 needs 3)
//	width         int      64          channels of the first stage (ResNet-18 uses 64;
//	                                   stages are width, 2w, 4w, 8w)
//	seed          int      1024        seed of weights, shuffling and augmentation
//	                                   (ColossalAI's launch default)
//	lr            float    1e-3        learning rate per rank; the run uses lr x ranks
//	milestones    [int]    [20,40,60,80]  MultiStepLR epochs, strictly increasing, >= 1
//	gamma         float    1/3         MultiStepLR factor, in (0, 1]
//	checkpoint    string   "./checkpoint"  checkpoint directory; may use {name},
//	                                   {plugin}, {precision} and {gpus}. Runs of one
//	                                   spec must expand it to different directories
//	                                   when interval > 0 or resume > 0. A fresh run
//	                                   whose directory holds another run's checkpoint
//	                                   files saves in DIR-run2, -run3, ... (the runner;
//	                                   ckpt/dirs.go).
//	interval      int      5           save a checkpoint every N epochs; 0 = never
//	resume        int      0           resume from the checkpoint of epoch E; 0 = fresh
//	target_acc    float    0           fail a run whose final test accuracy is below
//	                                   this fraction, e.g. 0.84; 0 = no gate
//	eval_every    int      1           evaluate every N epochs; 0 = only after the last
//	results_dir   string   "results"   where results/<spec>-<run>.json are written
//	device        string   "auto"      "auto" (GPUs if any, else CPU) | "cpu" | "cuda"
//	concurrent    bool     false       train the grid's runs at the same time where the
//	                                   devices allow: always on the CPU (the runs split
//	                                   the cores); on GPUs when share_devices = true or
//	                                   the runs' ranks together fit the GPUs; otherwise
//	                                   one after another, with a warning (planGrid)
//	share_devices bool     true        a run with more ranks than devices puts several
//	                                   ranks on one device; false makes it an error
//	comm          string   "auto"      how the ranks of a run communicate:
//	                                   "auto": "device" on GPUs, "host" on the CPU;
//	                                   "device": GPU ranks copy each other's buffers
//	                                   and sum them with the GPU's own kernels
//	                                   (ranks may share a GPU); "nccl": NCCL, one
//	                                   rank per GPU (NCCL refuses two on one GPU);
//	                                   "host": collectives over host memory (GPU
//	                                   ranks stage through it: the slow, portable
//	                                   path). CPU runs accept only "auto" and "host".
//	device_batches bool    true        hold the data sets in each rank's backend memory
//	                                   and build batches there (same values bit for bit);
//	                                   false builds them on the host and uploads them.
//	                                   Gemini with a device_budget always uses the host.
//	cuda_graphs   bool     false       replay each step's forward, loss and backward
//	                                   as a CUDA graph (captured after 2 eager steps;
//	                                   again when the loss scale changes); the loss
//	                                   read, scaler and Adam stay eager. Only runs of
//	                                   one rank with torch_ddp or low_level_zero on a
//	                                   GPU; others (CPU, Gemini, gpus > 1) log why and
//	                                   train eagerly. Same results bit for bit.
//
//	[synthetic]            only used when dataset = "synthetic"
//	train         int      10000       training images (>= batch_size)
//	test          int      2000        test images (>= 1)
//	seed          int      top seed    seed of the generated images
//
//	[grid]                 every combination is one run
//	plugin        [string] ["torch_ddp"]  "torch_ddp" | "torch_ddp_fp16" |
//	                                   "low_level_zero" | "gemini"
//	precision     [string] per plugin  "fp32" | "fp16" | "bf16"; when absent each
//	                                   plugin gets its ColossalAI default: fp32 for
//	                                   torch_ddp, fp16 for the others
//	gpus          [int]    [1]         ranks (>= 1); more ranks than devices share them
//
//	[[run]]                one explicit run, repeatable, instead of or besides [grid]
//	plugin        string   required
//	precision     string   per plugin default as in [grid]
//	gpus          int      1
//
//	[zero]                 low_level_zero only
//	stage         int      1           ZeRO stage, 1 or 2
//
//	[fp16]                 dynamic loss scaling of fp16 runs (bf16 and fp32 use none).
//	                       Defaults depend on the plugin: torch_ddp follows
//	                       torch.cuda.amp.GradScaler, low_level_zero and gemini
//	                       ColossalAI's DynamicGradScaler with the example's 2^5 start.
//	                       A key given here applies to every fp16 run.
//	initial_scale   float  2^16 torch_ddp, 2^5 low_level_zero/gemini
//	growth_factor   float  2           (> 1)
//	backoff_factor  float  0.5         in (0, 1)
//	growth_interval int    2000 torch_ddp, 1000 low_level_zero/gemini: clean steps
//	                                   before the scale grows
//	hysteresis      int    1 torch_ddp, 2 low_level_zero/gemini: overflowing steps
//	                                   before the scale backs off
//	min_scale       float  0 torch_ddp (none), 1 low_level_zero/gemini
//	max_scale       float  0 torch_ddp (none), 2^32 low_level_zero/gemini; 0 = no cap
//
//	[gemini]               gemini only
//	placement       string "static"    "static" | "auto"
//	device_budget   size   "0"         device memory a rank may use; "0" = unlimited
//	                                   (the evaluation then runs in batches of at
//	                                   most batch_size, so it keeps the budget too)
//	chunk_size      size   "auto"      chunk capacity, or "auto" to search for one
//	shard_param_frac   float 1.0       static: fraction of chunks sharded over ranks
//	offload_optim_frac float 0.0       static: fraction of optimizer state on the host
//	offload_param_frac float 0.0       static: fraction of parameters on the host
//	gpu_margin_mem_ratio float 0.8     auto: fraction of the device memory left after
//	                                   the warm-up peak that may hold optimizer state
//	max_prefetch    int    0           after warm-up, upload the next N chunks in the
//	                                   traced order of use ahead of their operators
//	                                   (on a copy stream on GPUs), within the budget;
//	                                   0 = off (ColossalAI's max_prefetch)
//
// A size is a byte count: an integer, or a string such as "512MiB", "2GiB",
// "1.5GB", "64KiB" (KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000,
// B or no unit is bytes). It is never negative and takes no sign or
// exponent ("1e3MB" is refused, naming "1000MB" instead).
//
// When the file has neither [grid] nor [[run]], the spec has one run:
// torch_ddp, fp32, 1 GPU (the example's defaults).
type Spec struct {
	File         string // the path the spec was read from (for messages)
	Name         string
	Epochs       int
	BatchSize    int
	Dataset      string
	DataDir      string
	dataDirSet   bool // data_dir is in the spec: search only there
	InChannels   int
	Width        int
	Seed         int64
	LR           float64
	Milestones   []int
	Gamma        float64
	Checkpoint   string
	Interval     int
	Resume       int
	TargetAcc    float64
	EvalEvery    int
	ResultsDir   string
	Device       string
	Concurrent   bool
	ShareDevices bool
	Comm         string
	// DeviceBatches: build batches in the backend from the resident data set.
	DeviceBatches bool
	// CUDAGraphs: replay the compute part of each step as a CUDA graph.
	CUDAGraphs bool

	Synthetic SyntheticSpec
	Grid      GridSpec
	Runs      []RunEntry
	Zero      ZeroSpec
	FP16      FP16Spec
	Gemini    GeminiSpec

	src lineIndex // where each key sits in the source, for later messages
}

// SyntheticSpec sizes the generated data set.
type SyntheticSpec struct {
	Train int
	Test  int
	Seed  int64
}

// GridSpec is the [grid] table. An empty Precision means "each plugin's
// default precision".
type GridSpec struct {
	Plugin    []string
	Precision []string
	GPUs      []int
}

// RunEntry is one [[run]] table. An empty Precision means the plugin's default.
type RunEntry struct {
	Plugin    string
	Precision string
	GPUs      int
}

// ZeroSpec is the [zero] table.
type ZeroSpec struct {
	Stage int
}

// FP16Spec holds the [fp16] keys the file sets; nil means "the plugin's
// default" (see LossScale).
type FP16Spec struct {
	InitialScale   *float64
	GrowthFactor   *float64
	BackoffFactor  *float64
	GrowthInterval *int
	Hysteresis     *int
	MinScale       *float64
	MaxScale       *float64
}

// GeminiSpec is the [gemini] table. Sizes are in bytes.
type GeminiSpec struct {
	Placement         string
	DeviceBudget      int64 // 0 = unlimited
	ChunkSize         int64 // 0 = auto
	ShardParamFrac    float64
	OffloadOptimFrac  float64
	OffloadParamFrac  float64
	GPUMarginMemRatio float64
	MaxPrefetch       int // chunks uploaded ahead; 0 = off
}

// Plugin names (spelled once, in package engine).
const (
	PluginTorchDDP     = engine.TorchDDP
	PluginTorchDDPFP16 = engine.TorchDDPFP16
	PluginLowLevelZero = engine.LowLevelZero
	PluginGemini       = engine.Gemini
)

var (
	plugins    = []string{PluginTorchDDP, PluginTorchDDPFP16, PluginLowLevelZero, PluginGemini}
	precisions = []string{"fp32", "fp16", "bf16"}
	datasets   = []string{"cifar10", "fashion-mnist", "synthetic"}
	devices    = []string{"auto", "cpu", "cuda"}
	comms      = []string{"auto", "device", "nccl", "host"}
)

// DefaultPrecision is the precision a plugin trains in when the spec does
// not say: ColossalAI's defaults (TorchDDPPlugin fp32, the others fp16).
func DefaultPrecision(plugin string) string {
	if plugin == PluginTorchDDP {
		return "fp32"
	}
	return "fp16"
}

// LossScale resolves the loss scaler of an fp16 run of the given plugin:
// the plugin's defaults overridden by the keys the [fp16] table sets.
func (s *Spec) LossScale(plugin string) engine.ScalerConfig {
	c := engine.ScalerConfig{ // ColossalAI DynamicGradScaler, example's initial_scale=2**5
		InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5,
		GrowthInterval: 1000, Hysteresis: 2, MinScale: 1, MaxScale: 1 << 32,
	}
	if plugin == PluginTorchDDP || plugin == PluginTorchDDPFP16 {
		// torch.cuda.amp.GradScaler: no hysteresis, no floor, no cap.
		c = engine.ScalerConfig{InitialScale: 1 << 16, GrowthFactor: 2, BackoffFactor: 0.5,
			GrowthInterval: 2000, Hysteresis: 1}
	}
	f := s.FP16
	setF(&c.InitialScale, f.InitialScale)
	setF(&c.GrowthFactor, f.GrowthFactor)
	setF(&c.BackoffFactor, f.BackoffFactor)
	setF(&c.MinScale, f.MinScale)
	setF(&c.MaxScale, f.MaxScale)
	if f.GrowthInterval != nil {
		c.GrowthInterval = *f.GrowthInterval
	}
	if f.Hysteresis != nil {
		c.Hysteresis = *f.Hysteresis
	}
	return c
}

func setF(dst *float64, v *float64) {
	if v != nil {
		*dst = *v
	}
}

// ScaledLR is the learning rate of a run with the given number of ranks
// (linear scaling, as the example does).
func (s *Spec) ScaledLR(ranks int) float64 { return s.LR * float64(ranks) }

// Defaults returns a Spec holding every default; getenv supplies DATA.
func Defaults(file string, getenv func(string) string) *Spec {
	dataDir := getenv("DATA")
	if dataDir == "" {
		dataDir = "./data"
	}
	return &Spec{
		File: file, Name: specNameFromFile(file),
		Epochs: 80, BatchSize: 100, Dataset: "cifar10", DataDir: dataDir,
		InChannels: 3, Width: 64, Seed: 1024, LR: 1e-3,
		Milestones: []int{20, 40, 60, 80}, Gamma: 1.0 / 3,
		Checkpoint: "./checkpoint", Interval: 5, EvalEvery: 1,
		ResultsDir: "results", Device: "auto", ShareDevices: true, Comm: "auto", DeviceBatches: true,
		Synthetic: SyntheticSpec{Train: 10000, Test: 2000},
		Zero:      ZeroSpec{Stage: 1},
		Gemini: GeminiSpec{Placement: "static", ShardParamFrac: 1,
			GPUMarginMemRatio: 0.8},
	}
}
