package spec

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// The raw* structs name every key the schema knows. Their fields are
// toml.Primitive so that the TOML decoder never fails on a wrong type (we
// type-check each value ourselves, with a line number), while every key it
// does not find a field for stays in MetaData.Undecoded() and is reported.

type rawSpec struct {
	Name         toml.Primitive `toml:"name"`
	Epochs       toml.Primitive `toml:"epochs"`
	BatchSize    toml.Primitive `toml:"batch_size"`
	Dataset      toml.Primitive `toml:"dataset"`
	DataDir      toml.Primitive `toml:"data_dir"`
	InChannels   toml.Primitive `toml:"in_channels"`
	Width        toml.Primitive `toml:"width"`
	Seed         toml.Primitive `toml:"seed"`
	LR           toml.Primitive `toml:"lr"`
	Milestones   toml.Primitive `toml:"milestones"`
	Gamma        toml.Primitive `toml:"gamma"`
	Checkpoint   toml.Primitive `toml:"checkpoint"`
	Interval     toml.Primitive `toml:"interval"`
	Resume       toml.Primitive `toml:"resume"`
	TargetAcc    toml.Primitive `toml:"target_acc"`
	EvalEvery    toml.Primitive `toml:"eval_every"`
	ResultsDir   toml.Primitive `toml:"results_dir"`
	Device       toml.Primitive `toml:"device"`
	Concurrent   toml.Primitive `toml:"concurrent"`
	ShareDevices toml.Primitive `toml:"share_devices"`
	Comm         toml.Primitive `toml:"comm"`
	DeviceBatch  toml.Primitive `toml:"device_batches"`
	CUDAGraphs   toml.Primitive `toml:"cuda_graphs"`
	Synthetic    toml.Primitive `toml:"synthetic"`
	Grid         toml.Primitive `toml:"grid"`
	Run          toml.Primitive `toml:"run"`
	Zero         toml.Primitive `toml:"zero"`
	FP16         toml.Primitive `toml:"fp16"`
	Gemini       toml.Primitive `toml:"gemini"`
}

type rawSynthetic struct {
	Train toml.Primitive `toml:"train"`
	Test  toml.Primitive `toml:"test"`
	Seed  toml.Primitive `toml:"seed"`
}

// rawCell holds the keys of [grid] (arrays: every combination is a run) and
// of each [[run]] (one value each); the decoders type-check them apart.
type rawCell struct {
	Plugin    toml.Primitive `toml:"plugin"`
	Precision toml.Primitive `toml:"precision"`
	GPUs      toml.Primitive `toml:"gpus"`
}

type (
	rawGrid = rawCell
	rawRun  = rawCell
)

type rawZero struct {
	Stage toml.Primitive `toml:"stage"`
}

type rawFP16 struct {
	InitialScale   toml.Primitive `toml:"initial_scale"`
	GrowthFactor   toml.Primitive `toml:"growth_factor"`
	BackoffFactor  toml.Primitive `toml:"backoff_factor"`
	GrowthInterval toml.Primitive `toml:"growth_interval"`
	Hysteresis     toml.Primitive `toml:"hysteresis"`
	MinScale       toml.Primitive `toml:"min_scale"`
	MaxScale       toml.Primitive `toml:"max_scale"`
}

type rawGemini struct {
	Placement         toml.Primitive `toml:"placement"`
	DeviceBudget      toml.Primitive `toml:"device_budget"`
	ChunkSize         toml.Primitive `toml:"chunk_size"`
	ShardParamFrac    toml.Primitive `toml:"shard_param_frac"`
	OffloadOptimFrac  toml.Primitive `toml:"offload_optim_frac"`
	OffloadParamFrac  toml.Primitive `toml:"offload_param_frac"`
	GPUMarginMemRatio toml.Primitive `toml:"gpu_margin_mem_ratio"`
	MaxPrefetch       toml.Primitive `toml:"max_prefetch"`
}

// decoder type-checks raw values and collects every error it finds.
type decoder struct {
	file string
	md   toml.MetaData
	idx  lineIndex
	errs []*Error
	bad  map[string]bool // paths whose value had the wrong type
}

func (d *decoder) errf(path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: d.idx.line(path),
		Key: path, Msg: fmt.Sprintf(format, args...)})
}

// value returns the Go value of a primitive, nil when the key is absent.
func (d *decoder) value(p toml.Primitive) any {
	if reflect.ValueOf(p).IsZero() {
		return nil
	}
	var v any
	if err := d.md.PrimitiveDecode(p, &v); err != nil {
		return nil // decoding into any cannot fail
	}
	return v
}

// wrongType records that path holds a value of the wrong TOML type.
func (d *decoder) wrongType(path string, v any, want string) {
	d.bad[path] = true
	d.errf(path, "got %s (want %s)", describe(v), want)
}

// describe names a decoded TOML value's type, with the value when short.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 40 {
			return "a string"
		}
		return fmt.Sprintf("the string %q", v)
	case int64:
		return fmt.Sprintf("the integer %d", v)
	case float64:
		return fmt.Sprintf("the float %v", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date/time"
	}
	return fmt.Sprintf("a %T", v)
}

// intRule checks an integer; it returns "" or what is wrong and expected.
type intRule func(v int64) string

func intRange(lo, hi int64) intRule {
	return func(v int64) string {
		if v < lo || v > hi {
			return fmt.Sprintf("%d is out of range (want an integer from %d to %d)", v, lo, hi)
		}
		return ""
	}
}

// floatRule checks a float; it returns "" or what is wrong and expected.
type floatRule func(v float64) string

func floatRange(lo, hi float64, loOpen, hiOpen bool) floatRule {
	return func(v float64) string {
		bad := math.IsNaN(v) || v < lo || v > hi || loOpen && v == lo || hiOpen && v == hi
		if !bad {
			return ""
		}
		l, h := "[", "]"
		if loOpen {
			l = "("
		}
		if hiOpen {
			h = ")"
		}
		hs := fmt.Sprint(hi)
		if math.IsInf(hi, 1) {
			hs = "inf"
		}
		return fmt.Sprintf("%v is out of range (want a number in %s%v, %s%s)", v, l, lo, hs, h)
	}
}

func (d *decoder) int64Val(path string, p toml.Primitive, dst *int64, rule intRule) bool {
	v := d.value(p)
	if v == nil {
		return false
	}
	n, ok := v.(int64)
	if !ok {
		d.wrongType(path, v, "an integer")
		return false
	}
	if msg := rule(n); msg != "" {
		d.errf(path, "%s", msg)
		return false
	}
	*dst = n
	return true
}

func (d *decoder) intVal(path string, p toml.Primitive, dst *int, rule intRule) bool {
	var n int64
	if !d.int64Val(path, p, &n, rule) {
		return false
	}
	*dst = int(n) // rules bound every int key well inside int32
	return true
}

func (d *decoder) intPtr(path string, p toml.Primitive, dst **int, rule intRule) {
	var n int
	if d.intVal(path, p, &n, rule) {
		*dst = &n
	}
}

func (d *decoder) floatVal(path string, p toml.Primitive, dst *float64, rule floatRule) bool {
	v := d.value(p)
	if v == nil {
		return false
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int64: // "lr = 1" means 1.0
		f = float64(x)
	default:
		d.wrongType(path, v, "a number")
		return false
	}
	if msg := rule(f); msg != "" {
		d.errf(path, "%s", msg)
		return false
	}
	*dst = f
	return true
}

func (d *decoder) floatPtr(path string, p toml.Primitive, dst **float64, rule floatRule) {
	var f float64
	if d.floatVal(path, p, &f, rule) {
		*dst = &f
	}
}

func (d *decoder) boolVal(path string, p toml.Primitive, dst *bool) {
	v := d.value(p)
	if v == nil {
		return
	}
	b, ok := v.(bool)
	if !ok {
		d.wrongType(path, v, "true or false")
		return
	}
	*dst = b
}

func (d *decoder) stringVal(path string, p toml.Primitive, dst *string, want string, allowed []string) bool {
	v := d.value(p)
	if v == nil {
		return false
	}
	s, ok := v.(string)
	if !ok {
		d.wrongType(path, v, want)
		return false
	}
	if allowed != nil && !contains(allowed, s) {
		d.errf(path, "unknown value %q (want %s)", s, orList(allowed))
		return false
	}
	*dst = s
	return true
}

// list returns the elements of an array value, or false after reporting.
func (d *decoder) list(path string, p toml.Primitive, want string) ([]any, bool) {
	v := d.value(p)
	if v == nil {
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		d.wrongType(path, v, want)
		return nil, false
	}
	if len(a) == 0 {
		d.errf(path, "empty array (want at least one value, or leave the key out)")
		return nil, false
	}
	return a, true
}

func (d *decoder) stringList(path string, p toml.Primitive, dst *[]string, allowed []string) {
	want := "an array of strings, each " + orList(allowed)
	a, ok := d.list(path, p, want)
	if !ok {
		return
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, isStr := e.(string)
		switch {
		case !isStr:
			d.bad[path] = true
			d.errf(path, "element %d is %s (want %s)", i+1, describe(e), orList(allowed))
			return
		case !contains(allowed, s):
			d.errf(path, "unknown value %q (want %s)", s, orList(allowed))
			return
		}
		out = append(out, s)
	}
	*dst = out
}

func (d *decoder) intList(path string, p toml.Primitive, dst *[]int, rule intRule) {
	a, ok := d.list(path, p, "an array of integers")
	if !ok {
		return
	}
	out := make([]int, 0, len(a))
	for i, e := range a {
		n, isInt := e.(int64)
		if !isInt {
			d.bad[path] = true
			d.errf(path, "element %d is %s (want an integer)", i+1, describe(e))
			return
		}
		if msg := rule(n); msg != "" {
			d.errf(path, "element %d: %s", i+1, msg)
			return
		}
		out = append(out, int(n))
	}
	*dst = out
}

// sizeVal reads a byte size: an integer or a string like "2GiB"; with
// allowAuto, "auto" gives 0.
func (d *decoder) sizeVal(path string, p toml.Primitive, dst *int64, allowAuto bool) {
	v := d.value(p)
	if v == nil {
		return
	}
	want := `a size like "512MiB", "2GiB" or a byte count`
	if allowAuto {
		want = `"auto" or ` + want
	}
	var n int64
	var shown string // the value as written, for the messages
	switch x := v.(type) {
	case int64:
		n, shown = x, strconv.FormatInt(x, 10)
	case string:
		if x == "auto" {
			if allowAuto {
				*dst = 0
				return
			}
			d.errf(path, "\"auto\" is not a size here (want %s)", want)
			return
		}
		var err error
		if n, err = ParseSize(x); err != nil {
			d.errf(path, "%v (want %s)", err, want)
			return
		}
		shown = strconv.Quote(x)
	default:
		d.wrongType(path, v, want)
		return
	}
	switch {
	case n < 0:
		d.errf(path, "size %s must not be negative (want %s)", shown, want)
	case n == 0 && allowAuto: // 0 would silently mean "auto"
		d.errf(path, "size %s is 0 bytes (want \"auto\" or a positive size)", shown)
	default:
		*dst = n
	}
}

// table decodes a table-valued key into raw (a *raw* struct). It reports
// a non-table value and returns false.
func (d *decoder) table(path string, p toml.Primitive, raw any) bool {
	v := d.value(p)
	if v == nil {
		return false
	}
	if _, ok := v.(map[string]any); !ok {
		d.wrongType(path, v, "a table ["+path+"]")
		return false
	}
	if err := d.md.PrimitiveDecode(p, raw); err != nil {
		d.errf(path, "%v", err) // raw structs hold only primitives: unexpected
		return false
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// CheckDevice says what is wrong with device as a device value ("want
// auto, cpu or cuda"), or nil when a spec accepts it.
func CheckDevice(device string) error {
	if !contains(devices, device) {
		return fmt.Errorf("want %s", orList(devices))
	}
	return nil
}

// CheckPlugin checks a plugin name given outside a spec (bench's --plugin).
func CheckPlugin(plugin string) error {
	if !contains(plugins, plugin) {
		return fmt.Errorf("want %s", orList(plugins))
	}
	return nil
}

// CheckPrecision checks a precision given outside a spec (bench's --precision).
func CheckPrecision(precision string) error {
	if !contains(precisions, precision) {
		return fmt.Errorf("want %s", orList(precisions))
	}
	return nil
}

// orList formats ["a","b","c"] as `"a", "b" or "c"`.
func orList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
