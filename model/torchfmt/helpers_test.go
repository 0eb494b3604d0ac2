package torchfmt

import (
	"bufio"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// refF16 decodes binary16 from the IEEE definition with float64 arithmetic,
// independently of f16ToF32.
func refF16(h uint16) float32 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0x1f:
		if mant != 0 {
			return float32(math.NaN())
		}
		return float32(math.Inf(int(sign)))
	case 0:
		return float32(sign * math.Ldexp(mant, -24))
	}
	return float32(sign * math.Ldexp(1024+mant, exp-25))
}

// sampleTensors returns a state dict touching every dtype and the awkward shapes:
// 0-dim, empty, 4-D. Half values are drawn as bit patterns so they are exactly
// representable and survive a round trip bit for bit.
func sampleTensors(rng *rand.Rand) []Tensor {
	f32 := make([]float32, 2*3*4*5)
	for i := range f32 {
		f32[i] = float32(rng.NormFloat64())
	}
	f32[0], f32[1], f32[2] = float32(math.Inf(-1)), float32(math.NaN()), math.SmallestNonzeroFloat32
	f16 := make([]float32, 37)
	for i := range f16 {
		h := uint16(rng.IntN(0x7c01)) | uint16(rng.IntN(2))<<15 // finite or inf, either sign
		f16[i] = refF16(h)
	}
	bf16 := make([]float32, 19)
	for i := range bf16 {
		b := uint32(rng.IntN(0x7f81)) | uint32(rng.IntN(2))<<15
		bf16[i] = math.Float32frombits(b << 16)
	}
	i64 := []int64{0, -1, 1 << 40, math.MinInt64, math.MaxInt64, int64(rng.Uint64())}
	return []Tensor{
		{Name: "conv.weight", DType: F32, Shape: []int{2, 3, 4, 5}, F32: f32},
		{Name: "half", DType: F16, Shape: []int{37}, F32: f16},
		{Name: "brain", DType: BF16, Shape: []int{19, 1}, F32: bf16},
		{Name: "ints", DType: I64, Shape: []int{2, 3}, I64: i64},
		{Name: "bn.num_batches_tracked", DType: I64, Shape: []int{}, I64: []int64{7}},
		{Name: "empty", DType: F32, Shape: []int{0, 3}, F32: []float32{}},
		{Name: "scalar_f16", DType: F16, Shape: nil, F32: []float32{-2.5}},
	}
}

// sameFloat compares bit patterns, treating any two NaNs as equal (half formats
// quieten signalling NaNs).
func sameFloat(a, b float32) bool {
	if a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// diffTensors describes the first difference between two tensor lists, or "".
func diffTensors(got, want []Tensor) string {
	if len(got) != len(want) {
		return "got " + strconv.Itoa(len(got)) + " tensors, want " + strconv.Itoa(len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		switch {
		case g.Name != w.Name:
			return "tensor " + strconv.Itoa(i) + " is " + g.Name + ", want " + w.Name
		case g.DType != w.DType:
			return w.Name + ": dtype " + g.DType + ", want " + w.DType
		case !slices.Equal(g.Shape, w.Shape) && len(g.Shape)+len(w.Shape) > 0:
			return w.Name + ": shape differs"
		case len(g.F32) != len(w.F32) || !slices.Equal(g.I64, w.I64):
			return w.Name + ": values differ"
		}
		for j := range w.F32 {
			if !sameFloat(g.F32[j], w.F32[j]) {
				return w.Name + "[" + strconv.Itoa(j) + "]: " + strconv.FormatFloat(float64(g.F32[j]), 'g', -1, 32) +
					", want " + strconv.FormatFloat(float64(w.F32[j]), 'g', -1, 32)
			}
		}
	}
	return ""
}

// goldenSpec is one line of testdata/resnet18_state_dict.txt.
type goldenSpec struct {
	name, dtype string
	shape       []int
}

func readGolden(t *testing.T) []goldenSpec {
	t.Helper()
	f, err := os.Open("testdata/resnet18_state_dict.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenSpec
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Fatalf("golden line %q: want key dtype shape", line)
		}
		g := goldenSpec{name: fields[0], dtype: fields[1], shape: []int{}}
		if fields[2] != "[]" {
			for _, s := range strings.Split(fields[2], ",") {
				d, err := strconv.Atoi(s)
				if err != nil {
					t.Fatalf("golden line %q: %v", line, err)
				}
				g.shape = append(g.shape, d)
			}
		}
		out = append(out, g)
	}
	return out
}

// resnetStateDict fills the golden ResNet-18 shapes with values that keep a
// forward pass finite (positive running variances, small weights).
func resnetStateDict(t *testing.T, rng *rand.Rand) []Tensor {
	var ts []Tensor
	for _, g := range readGolden(t) {
		n, _ := numel(g.shape)
		tt := newTensor(g.name, g.dtype, g.shape, n)
		for i := range tt.F32 {
			switch {
			case strings.HasSuffix(g.name, "running_var"):
				tt.F32[i] = 0.5 + rng.Float32()
			case strings.HasSuffix(g.name, "bn1.weight"), strings.HasSuffix(g.name, "bn2.weight"):
				tt.F32[i] = 1 + 0.1*float32(rng.NormFloat64())
			default:
				tt.F32[i] = 0.05 * float32(rng.NormFloat64())
			}
		}
		for i := range tt.I64 {
			tt.I64[i] = int64(rng.IntN(1000))
		}
		ts = append(ts, tt)
	}
	return ts
}
