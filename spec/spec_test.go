package spec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

func mustParse(t *testing.T, src string) *Spec {
	t.Helper()
	s, err := ParseWithEnv("t.toml", []byte(src), noEnv)
	if err != nil {
		t.Fatalf("parse:\n%s\nerror: %v", src, err)
	}
	return s
}

func TestSpecDefaults(t *testing.T) {
	s := mustParse(t, "# nothing set\n")
	want := Defaults("t.toml", noEnv)
	want.Synthetic.Seed = want.Seed
	want.src = s.src
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", s, want)
	}
	// The reference recipe, spelled out independently of Defaults.
	if s.Name != "t" || s.Epochs != 80 || s.BatchSize != 100 || s.LR != 1e-3 ||
		s.Gamma != 1.0/3 || !reflect.DeepEqual(s.Milestones, []int{20, 40, 60, 80}) ||
		s.Interval != 5 || s.Checkpoint != "./checkpoint" || s.DataDir != "./data" ||
		s.Zero.Stage != 1 || s.Gemini.Placement != "static" || s.Gemini.ShardParamFrac != 1 ||
		!s.ShareDevices || s.Device != "auto" || s.Comm != "auto" {
		t.Fatalf("defaults differ from the reference recipe: %+v", s)
	}
	env := func(k string) string {
		if k == "DATA" {
			return "/datasets"
		}
		return ""
	}
	s2, err := ParseWithEnv("t.toml", nil, env)
	if err != nil || s2.DataDir != "/datasets" {
		t.Fatalf("DATA env: got %q, %v", s2.DataDir, err)
	}
}

const fullSpec = `
name = "full"
epochs = 12
batch_size = 50
dataset = "synthetic"
data_dir = "/d"
in_channels = 1
width = 16
seed = 7
lr = 2          # an integer is accepted for a float
milestones = [3, 6]
gamma = 0.5
checkpoint = "./ck/{name}-{plugin}-{precision}-{gpus}"
interval = 0
resume = 3
target_acc = 0.6
eval_every = 2
results_dir = "out"
device = "cpu"
concurrent = true
share_devices = false
comm = "host"
device_batches = false

[synthetic]
train = 4000
test = 500

[grid]
plugin = ["gemini"]
precision = ["bf16"]
gpus = [1, 2]

[[run]]
plugin = "low_level_zero"

[zero]
stage = 2

[fp16]
initial_scale = 1024
growth_factor = 4.0
backoff_factor = 0.25
growth_interval = 10
hysteresis = 3
min_scale = 2
max_scale = 65536

[gemini]
placement = "auto"
device_budget = "512MiB"
chunk_size = "64 MiB"
shard_param_frac = 0.5
offload_optim_frac = 0.25
offload_param_frac = 0.125
gpu_margin_mem_ratio = 0.7
max_prefetch = 3
`

func TestSpecAllKeys(t *testing.T) {
	s := mustParse(t, fullSpec)
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	want := &Spec{
		File: "t.toml", Name: "full", Epochs: 12, BatchSize: 50, Dataset: "synthetic",
		DataDir: "/d", dataDirSet: true, InChannels: 1, Width: 16, Seed: 7, LR: 2, Milestones: []int{3, 6},
		Gamma: 0.5, Checkpoint: "./ck/{name}-{plugin}-{precision}-{gpus}", Interval: 0,
		Resume: 3, TargetAcc: 0.6, EvalEvery: 2, ResultsDir: "out", Device: "cpu",
		Concurrent: true, ShareDevices: false, Comm: "host", DeviceBatches: false,
		Synthetic: SyntheticSpec{Train: 4000, Test: 500, Seed: 7},
		Grid:      GridSpec{Plugin: []string{"gemini"}, Precision: []string{"bf16"}, GPUs: []int{1, 2}},
		Runs:      []RunEntry{{Plugin: "low_level_zero", GPUs: 1}},
		Zero:      ZeroSpec{Stage: 2},
		FP16: FP16Spec{InitialScale: f(1024), GrowthFactor: f(4), BackoffFactor: f(0.25),
			GrowthInterval: i(10), Hysteresis: i(3), MinScale: f(2), MaxScale: f(65536)},
		Gemini: GeminiSpec{Placement: "auto", DeviceBudget: 512 << 20, ChunkSize: 64 << 20,
			ShardParamFrac: 0.5, OffloadOptimFrac: 0.25, OffloadParamFrac: 0.125, GPUMarginMemRatio: 0.7, MaxPrefetch: 3},
		src: s.src,
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
	if got := s.ScaledLR(4); got != 8 {
		t.Fatalf("ScaledLR(4) = %v, want 8", got)
	}
}

func TestLossScale(t *testing.T) {
	s := mustParse(t, "")
	ddp := s.LossScale(PluginTorchDDP)
	if ddp.InitialScale != 65536 || ddp.GrowthInterval != 2000 || ddp.Hysteresis != 1 ||
		ddp.BackoffFactor != 0.5 || ddp.GrowthFactor != 2 || ddp.MaxScale != 0 {
		t.Fatalf("torch_ddp scaler = %+v, want GradScaler defaults", ddp)
	}
	for _, p := range []string{PluginLowLevelZero, PluginGemini} {
		c := s.LossScale(p)
		if c.InitialScale != 32 || c.GrowthInterval != 1000 || c.Hysteresis != 2 ||
			c.MinScale != 1 || c.MaxScale != 4294967296 {
			t.Fatalf("%s scaler = %+v, want DynamicGradScaler with initial 2^5", p, c)
		}
	}
	s = mustParse(t, "[fp16]\ninitial_scale = 1024\ngrowth_interval = 7\n")
	for _, p := range []string{PluginTorchDDP, PluginGemini} {
		c := s.LossScale(p)
		if c.InitialScale != 1024 || c.GrowthInterval != 7 {
			t.Fatalf("%s: [fp16] overrides not applied: %+v", p, c)
		}
	}
	if c := s.LossScale(PluginGemini); c.Hysteresis != 2 {
		t.Fatalf("unset keys must keep the plugin default, got %+v", c)
	}
}

// specErrCase: the source, then the exact "FILE:LINE: key `x`: " prefix
// and a fragment of the message of one expected error.
type specErrCase struct {
	name, src, prefix, frag string
}

var specErrCases = []specErrCase{
	{"typo", "epochs = 3\nepoch = 4\n", "t.toml:2: key `epoch`: ", "unknown key (did you mean `epochs`?)"},
	{"case", "\nEpochs = 3\n", "t.toml:2: key `Epochs`: ", "did you mean `epochs`?"},
	{"typo in table", "[gemini]\nplacment = \"auto\"\n", "t.toml:2: key `gemini.placment`: ", "did you mean `gemini.placement`?"},
	{"wrong table", "placement = \"auto\"\n", "t.toml:1: key `placement`: ", "belongs in the [gemini] table"},
	{"unknown table", "[foo]\nx = 1\n", "t.toml:1: key `foo`: ", "unknown key (known keys at the top level: "},
	{"unknown nested", "[gemini.sub]\nx = 1\n", "t.toml:1: key `gemini.sub`: ", "unknown key"},
	{"string for int", "epochs = \"80\"\n", "t.toml:1: key `epochs`: ", "got the string \"80\" (want an integer)"},
	{"float for int", "\n\nepochs = 80.0\n", "t.toml:3: key `epochs`: ", "got the float 80 (want an integer)"},
	{"string for float", "lr = \"fast\"\n", "t.toml:1: key `lr`: ", "(want a number)"},
	{"bool", "concurrent = 1\n", "t.toml:1: key `concurrent`: ", "(want true or false)"},
	{"zero epochs", "epochs = 0\n", "t.toml:1: key `epochs`: ", "0 is out of range (want an integer from 1 to 100000)"},
	{"gamma 0", "gamma = 0\n", "t.toml:1: key `gamma`: ", "out of range (want a number in (0, 1])"},
	{"gamma big", "gamma = 1.5\n", "t.toml:1: key `gamma`: ", "1.5 is out of range"},
	{"target", "target_acc = 84.0\n", "t.toml:1: key `target_acc`: ", "want a number in [0, 1]"},
	{"channels", "in_channels = 2\n", "t.toml:1: key `in_channels`: ", "2 is not allowed (want 1 or 3)"},
	{"dataset", "dataset = \"mnist\"\n", "t.toml:1: key `dataset`: ", `unknown value "mnist" (want "cifar10", "fashion-mnist" or "synthetic")`},
	{"device", "device = \"gpu\"\n", "t.toml:1: key `device`: ", `unknown value "gpu"`},
	{"comm", "comm = \"mpi\"\n", "t.toml:1: key `comm`: ", `unknown value "mpi" (want "auto", "device", "nccl" or "host")`},
	{"comm on cpu", "device = \"cpu\"\n\ncomm = \"nccl\"\n", "t.toml:3: key `comm`: ", `"nccl" needs GPU ranks, but device = "cpu" (want "auto" or "host")`},
	{"grid plugin", "[grid]\nplugin = [\n  \"gemini\",\n  \"zero3\",\n]\n", "t.toml:2: key `grid.plugin`: ", `unknown value "zero3"`},
	{"grid precision", "[grid]\nprecision = [\"fp8\"]\n", "t.toml:2: key `grid.precision`: ", `unknown value "fp8"`},
	{"grid gpus", "[grid]\ngpus = [1, 0]\n", "t.toml:2: key `grid.gpus`: ", "element 2: 0 is out of range"},
	{"grid gpus type", "[grid]\ngpus = [1, \"2\"]\n", "t.toml:2: key `grid.gpus`: ", "element 2 is the string \"2\" (want an integer)"},
	{"grid empty", "[grid]\ngpus = []\n", "t.toml:2: key `grid.gpus`: ", "empty array"},
	{"grid scalar", "[grid]\nplugin = \"gemini\"\n", "t.toml:2: key `grid.plugin`: ", "got the string \"gemini\" (want an array of strings"},
	{"grid not table", "grid = 5\n", "t.toml:1: key `grid`: ", "got the integer 5 (want a table [grid])"},
	{"run plugin", "[[run]]\nplugin = \"gemini\"\n\n[[run]]\nplugin = \"ddp\"\n", "t.toml:5: key `run[2].plugin`: ", `unknown value "ddp"`},
	{"run missing plugin", "[[run]]\nplugin = \"gemini\"\n[[run]]\ngpus = 2\n", "t.toml:3: key `run[2]`: ", "missing key `plugin`"},
	{"run unknown key", "[[run]]\nplugin = \"gemini\"\n[[run]]\nplugin = \"gemini\"\nranks = 2\n", "t.toml:5: key `run[2].ranks`: ", "unknown key"},
	{"run gpus", "[[run]]\nplugin = \"gemini\"\ngpus = 0\n", "t.toml:3: key `run[1].gpus`: ", "0 is out of range"},
	{"run not tables", "run = 3\n", "t.toml:1: key `run`: ", "want [[run]] tables"},
	{"zero stage", "[zero]\nstage = 3\n", "t.toml:2: key `zero.stage`: ", "3 is not allowed (want 1 or 2)"},
	{"budget unit", "[gemini]\ndevice_budget = \"2XB\"\n", "t.toml:2: key `gemini.device_budget`: ", `unknown unit "XB"`},
	{"budget type", "[gemini]\ndevice_budget = true\n", "t.toml:2: key `gemini.device_budget`: ", "got the boolean true"},
	{"budget negative", "[gemini]\ndevice_budget = -5\n", "t.toml:2: key `gemini.device_budget`: ", "size -5 must not be negative (want"},
	{"budget negative string", "[gemini]\ndevice_budget = \"-5MiB\"\n", "t.toml:2: key `gemini.device_budget`: ", `size "-5MiB" must not be negative (want a size like "512MiB"`},
	{"budget exponent", "[gemini]\ndevice_budget = \"1e3MB\"\n", "t.toml:2: key `gemini.device_budget`: ", `size "1e3MB" is in exponent notation, which sizes do not take (write "1000MB")`},
	{"budget auto", "[gemini]\ndevice_budget = \"auto\"\n", "t.toml:2: key `gemini.device_budget`: ", `"auto" is not a size here (want a size like`},
	{"chunk zero", "[gemini]\nchunk_size = \"0\"\n", "t.toml:2: key `gemini.chunk_size`: ", `size "0" is 0 bytes (want "auto" or a positive size)`},
	{"chunk zero unit", "[gemini]\nchunk_size = \"0MiB\"\n", "t.toml:2: key `gemini.chunk_size`: ", `size "0MiB" is 0 bytes (want "auto" or a positive size)`},
	{"chunk zero int", "[gemini]\nchunk_size = 0\n", "t.toml:2: key `gemini.chunk_size`: ", `size 0 is 0 bytes (want "auto" or a positive size)`},
	{"placement", "[gemini]\nplacement = \"cpu\"\n", "t.toml:2: key `gemini.placement`: ", `(want "static" or "auto")`},
	{"frac", "[gemini]\noffload_optim_frac = 1.5\n", "t.toml:2: key `gemini.offload_optim_frac`: ", "want a number in [0, 1]"},
	{"prefetch", "[gemini]\nmax_prefetch = -1\n", "t.toml:2: key `gemini.max_prefetch`: ", "out of range"},
	{"dotted", "name = \"x\"\ngemini.placement = \"bad\"\n", "t.toml:2: key `gemini.placement`: ", "unknown value"},
	{"inline table", "gemini = { placement = \"bad\" }\n", "t.toml:1: key `gemini.placement`: ", "unknown value"},
	{"fp16 growth", "[fp16]\ngrowth_factor = 1\n", "t.toml:2: key `fp16.growth_factor`: ", "out of range"},
	{"fp16 backoff", "[fp16]\nbackoff_factor = 1.0\n", "t.toml:2: key `fp16.backoff_factor`: ", "want a number in (0, 1)"},
	{"fp16 min>max", "[fp16]\nmin_scale = 8\nmax_scale = 4\n", "t.toml:2: key `fp16.min_scale`: ", "above max_scale"},
	{"milestones", "\nmilestones = [20, 10]\n", "t.toml:2: key `milestones`: ", "not strictly increasing"},
	{"template", "checkpoint = \"./c/{plugins}\"\n", "t.toml:1: key `checkpoint`: ", "unknown placeholder {plugins}"},
	{"template brace", "checkpoint = \"./c/{plugin\"\n", "t.toml:1: key `checkpoint`: ", "unbalanced braces"},
	{"cifar channels", "dataset = \"cifar10\"\nin_channels = 1\n", "t.toml:2: key `in_channels`: ", "cifar10 has 3 channels"},
	{"resume past end", "epochs = 10\nresume = 11\n", "t.toml:2: key `resume`: ", "epoch 11 is past the last epoch 10"},
	{"synthetic small", "dataset = \"synthetic\"\n[synthetic]\ntrain = 50\n", "t.toml:3: key `synthetic.train`: ", "less than one batch of 100"},
	{"name", "name = \"a b\"\n", "t.toml:1: key `name`: ", "not a valid name"},
	{"syntax", "epochs = 1\nlr = = 2\n", "t.toml:2: key `lr`: ", "TOML syntax error"},
	{"duplicate key", "epochs = 1\nepochs = 2\n", "t.toml:2:", "TOML syntax error"},
}

func TestSpecErrors(t *testing.T) {
	for _, c := range specErrCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWithEnv("t.toml", []byte(c.src), noEnv)
			if err == nil {
				t.Fatalf("no error for:\n%s", c.src)
			}
			var found bool
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, c.prefix) && strings.Contains(line, c.frag) {
					found = true
				}
			}
			if !found {
				t.Fatalf("error\n%v\nhas no line starting %q containing %q", err, c.prefix, c.frag)
			}
			var se *Error
			if !errors.As(err, &se) || se.File != "t.toml" {
				t.Fatalf("error is not a *Error naming the file: %#v", err)
			}
		})
	}
}

func TestSpecErrorsAllReportedInLineOrder(t *testing.T) {
	src := "[gemini]\nplacement = \"x\"\n[grid]\ngpus = [0]\n[zero]\nstage = 9\n"
	// The top-level key below sits before any table in the file.
	src = "epochs = -1\n" + src
	_, err := ParseWithEnv("t.toml", []byte(src), noEnv)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"t.toml:1: key `epochs`", "t.toml:3: key `gemini.placement`",
		"t.toml:5: key `grid.gpus`", "t.toml:7: key `zero.stage`"}
	if len(lines) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

// The checks that read several keys run beside the single-key errors, each
// only where the keys it reads are clean: one pass reports everything.
func TestSpecCrossChecksBesideOtherErrors(t *testing.T) {
	src := "gamma = 2\nmilestones = [5, 2]\ndevice = \"cpu\"\ncomm = \"nccl\"\nepochs = 0\nresume = 3\n"
	_, err := ParseWithEnv("t.toml", []byte(src), noEnv)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	// resume = 3 against the invalid epochs is not judged: epochs has its own error.
	want := []string{"t.toml:1: key `gamma`", "t.toml:2: key `milestones`: [5 2] is not strictly increasing",
		"t.toml:4: key `comm`: \"nccl\" needs GPU ranks", "t.toml:5: key `epochs`"}
	if len(lines) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestSpecTypeErrorHidesInnerKeys(t *testing.T) {
	_, err := ParseWithEnv("t.toml", []byte("epochs = { a = 1 }\n"), noEnv)
	if err == nil || strings.Count(err.Error(), "\n") != 0 || !strings.Contains(err.Error(), "a table") {
		t.Fatalf("want exactly one wrong-type error, got %v", err)
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "4096": 4096, "2GiB": 2 << 30, "512MiB": 512 << 20, " 64 KiB ": 64 << 10,
		"1.5GB": 1500000000, "3tib": 3 << 40, "10B": 10, "1.5KiB": 1536, "7kb": 7000,
	}
	for in, want := range good {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	// Each refusal says in words what is wrong with the size as written.
	bad := map[string]string{
		"":            `size "" is empty`,
		"GiB":         `size "GiB" does not start with a number`,
		"2XB":         `size "2XB" has unknown unit "XB" (want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)`,
		"5 XB":        `size "5 XB" has unknown unit "XB" (want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)`,
		"0.5B":        `size "0.5B" is not a whole number of bytes`,
		"-1":          `size "-1" must not be negative`,
		"-5MiB":       `size "-5MiB" must not be negative`,
		" -0.5 GiB":   `size " -0.5 GiB" must not be negative`,
		"+5MiB":       `size "+5MiB" starts with a sign (write "5MiB")`,
		"1e3":         `size "1e3" is in exponent notation, which sizes do not take (write "1000")`,
		"1e3MB":       `size "1e3MB" is in exponent notation, which sizes do not take (write "1000MB")`,
		"2.5E+2 KiB":  `size "2.5E+2 KiB" is in exponent notation, which sizes do not take (write "250KiB")`,
		"1e-3GB":      `size "1e-3GB" is in exponent notation, which sizes do not take (write the number out, with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)`,
		"1..2GiB":     `size "1..2GiB": "1..2" is not a number`,
		"99999999TiB": `size "99999999TiB" is too large (want less than 4 EiB)`,
	}
	for in, want := range bad {
		if got, err := ParseSize(in); err == nil || err.Error() != want {
			t.Errorf("ParseSize(%q) = %d, %v; want the error %s", in, got, err, want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	cases := map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB",
		3 << 29: "1.50 GiB", 5 << 40: "5.00 TiB", 5 << 50: "5120.00 TiB"}
	for in, want := range cases {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestLineIndex(t *testing.T) {
	src := `# comment = not a key
name = "x" # trailing
"quoted key" = 1
a.b = 2
[grid]
plugin = [
  "x = y",
]
[[run]]
plugin = "p"
[[ run ]]
gpus = 2
[ 'lit'.sub ]
k=1
`
	idx := indexLines(src)
	want := map[string]int{"name": 2, "quoted key": 3, "a.b": 4, "grid": 5, "grid.plugin": 6,
		"run[1]": 9, "run[1].plugin": 10, "run[2]": 11, "run[2].gpus": 12, "lit.sub": 13, "lit.sub.k": 14}
	for k, n := range want {
		if got, ok := idx[k]; !ok || got != n {
			t.Errorf("line of %q = %d (present %v), want %d", k, got, ok, n)
		}
	}
	if len(idx) != len(want) {
		t.Errorf("index has extra entries: %v", idx)
	}
	if idx.line("grid.plugin.deeper") != 6 || idx.line("run[2].missing") != 11 || idx.line("nothing") != 1 {
		t.Errorf("fallback to the enclosing key/table failed")
	}
}

// Deep nesting is refused before decoding, naming file and line; quotes
// and comments do not count, and real specs pass.
func TestParseSpecNestingDepth(t *testing.T) {
	deep := "epochs = 2\nx = " + strings.Repeat("[", 50000) + strings.Repeat("]", 50000) + "\n"
	_, err := Parse("deep.toml", []byte(deep))
	if err == nil || !strings.Contains(err.Error(), "deep.toml:2:") || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("50000 levels: %v, want deep.toml:2: nested more than ...", err)
	}
	if err := checkSpecDepth("big.toml", make([]byte, maxSpecBytes+1)); err == nil || !strings.Contains(err.Error(), "big.toml") {
		t.Fatalf("a spec over %d bytes: %v, want an error naming the file", maxSpecBytes, err)
	}
	quoted := "name = \"" + strings.Repeat("[", 100) + "\" # " + strings.Repeat("{", 100) + "\n"
	if err := checkSpecDepth("q.toml", []byte(quoted)); err != nil {
		t.Fatalf("brackets in a string and a comment: %v", err)
	}
}

// A data_dir in the spec confines the data search to it.
func TestParseSpecDataDirSet(t *testing.T) {
	s, err := Parse("a.toml", []byte("data_dir = \"/d\"\n"))
	if err != nil || !s.dataDirSet {
		t.Fatalf("data_dir set: %v %v", s, err)
	}
	if s, err = Parse("b.toml", []byte("epochs = 2\n")); err != nil || s.dataDirSet {
		t.Fatalf("no data_dir: %v %v", s, err)
	}
}
