package model

import (
	"math"
	"slices"
	"strings"
	"testing"

	"resnetlab/kernels"
)

func TestSameSeedSameParams(t *testing.T) {
	be := newBackend(t)
	a, b, c := NewResNet18(be, smallConfig(8, 5)), NewResNet18(be, smallConfig(8, 5)), NewResNet18(be, smallConfig(8, 6))
	defer a.Free()
	defer b.Free()
	defer c.Free()
	sa, sb, sc := a.StateDict(), b.StateDict(), c.StateDict()
	for i := range sa {
		if !slices.Equal(sa[i].Data, sb[i].Data) {
			t.Errorf("%s differs between two models with seed 5", sa[i].Name)
		}
	}
	if slices.Equal(sa[0].Data, sc[0].Data) {
		t.Errorf("conv1.weight identical for seeds 5 and 6")
	}
}

// TestInitDistribution checks torchvision's init statistically on the full
// model: conv weights N(0, 2/(out*k*k)), BN 1/0 with stats 0/1, fc
// U(-1/sqrt(512), 1/sqrt(512)) for weight and bias.
func TestInitDistribution(t *testing.T) {
	be := newBackend(t)
	m := NewResNet18(be, DefaultConfig())
	defer m.Free()
	for _, e := range m.StateDict() {
		switch {
		case len(e.Shape) == 4:
			std := math.Sqrt(2 / float64(e.Shape[0]*e.Shape[2]*e.Shape[3]))
			mean, sd := moments(e.Data)
			// Sampling error of the std is ~std/sqrt(2n); allow 5 sigma.
			n := float64(len(e.Data))
			if math.Abs(sd-std) > 5*std/math.Sqrt(2*n) || math.Abs(mean) > 5*std/math.Sqrt(n) {
				t.Errorf("%s: mean %.4g std %.5g, want 0 and %.5g (kaiming fan_out)", e.Name, mean, sd, std)
			}
		case strings.HasPrefix(e.Name, "fc."):
			bound := 1 / math.Sqrt(512)
			lo, hi := slices.Min(e.Data), slices.Max(e.Data)
			if float64(lo) < -bound || float64(hi) > bound || float64(hi-lo) < bound {
				t.Errorf("%s: range [%.4g, %.4g], want spread over ±%.4g", e.Name, lo, hi, bound)
			}
		case strings.HasSuffix(e.Name, "num_batches_tracked"):
		default:
			want := float32(0)
			if strings.HasSuffix(e.Name, ".weight") || strings.HasSuffix(e.Name, "running_var") {
				want = 1
			}
			if slices.ContainsFunc(e.Data, func(v float32) bool { return v != want }) {
				t.Errorf("%s: want all %g", e.Name, want)
			}
		}
	}
}

func moments(v []float32) (mean, sd float64) {
	for _, x := range v {
		mean += float64(x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		sd += (float64(x) - mean) * (float64(x) - mean)
	}
	return mean, math.Sqrt(sd / float64(len(v)))
}

func TestLoadStateDictRoundTrip(t *testing.T) {
	be := newBackend(t)
	a, b := NewResNet18(be, smallConfig(4, 1)), NewResNet18(be, smallConfig(4, 2))
	defer a.Free()
	defer b.Free()
	a.BN1.NumBatchesTracked = 7
	sd := a.StateDict()
	sd[2].Data[0] = 0.25 // bn1.bias: not just the init value
	if err := b.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	got := b.StateDict()
	for i := range sd {
		if got[i].Name != sd[i].Name || !slices.Equal(got[i].Data, sd[i].Data) || !slices.Equal(got[i].Int64, sd[i].Int64) {
			t.Errorf("entry %s differs after LoadStateDict", sd[i].Name)
		}
	}
}

func TestLoadStateDictErrors(t *testing.T) {
	be := newBackend(t)
	m := NewResNet18(be, smallConfig(4, 1))
	defer m.Free()
	good := m.StateDict()
	other := NewResNet18(be, smallConfig(4, 9))
	defer other.Free()
	cases := []struct {
		name string
		edit func([]NamedTensor) []NamedTensor
		want []string
	}{
		{"missing", func(s []NamedTensor) []NamedTensor { return slices.Delete(s, 3, 4) },
			[]string{`missing key "bn1.running_mean"`}},
		{"extra", func(s []NamedTensor) []NamedTensor {
			return append(s, NamedTensor{Name: "fc2.weight", Shape: []int{2}, Data: make([]float32, 2)})
		}, []string{`unexpected key "fc2.weight"`}},
		{"shape", func(s []NamedTensor) []NamedTensor {
			s[0].Shape, s[0].Data = []int{4, 1, 7, 7}, make([]float32, 4*49)
			return s
		}, []string{`"conv1.weight"`, "[4 1 7 7]", "[4 3 7 7]"}},
		{"counter", func(s []NamedTensor) []NamedTensor {
			s[5].Int64 = nil
			return s
		}, []string{`"bn1.num_batches_tracked"`, "int64"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sd := c.edit(other.StateDict())
			err := m.LoadStateDict(sd)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			// A rejected state dict changes nothing.
			now := m.StateDict()
			for i := range good {
				if !slices.Equal(now[i].Data, good[i].Data) || !slices.Equal(now[i].Int64, good[i].Int64) {
					t.Fatalf("%s changed by a rejected LoadStateDict", good[i].Name)
				}
			}
		})
	}
}

// TestF16Layout: a fp16 model keeps BN in fp32, stores conv/fc weights and
// activations as fp16, and its logits stay close to the fp32 model's.
func TestF16Layout(t *testing.T) {
	be := newBackend(t)
	cfg := smallConfig(8, 4)
	m32 := NewResNet18(be, cfg)
	defer m32.Free()
	cfg.DType = kernels.F16
	m16 := NewResNet18(be, cfg)
	defer m16.Free()
	for _, p := range m16.Params() {
		want := kernels.F16
		if len(p.W.Shape) == 1 && !strings.HasPrefix(p.Name, "fc.") {
			want = kernels.F32
		}
		if p.W.DType != want || p.G.DType != want {
			t.Errorf("%s: W %s G %s, want %s", p.Name, p.W.DType, p.G.DType, want)
		}
	}
	if err := m16.LoadStateDict(m32.StateDict()); err != nil {
		t.Fatal(err)
	}
	x, host := images(be, newRNG(3), 4, 3, 32)
	defer be.Free(x)
	x16 := upload(be, kernels.CatData, kernels.F16, host, 4, 3, 32, 32)
	defer be.Free(x16)
	l32 := download(be, m32.Forward(x, true))
	y16 := m16.Forward(x16, true)
	if y16.DType != kernels.F16 {
		t.Errorf("fp16 logits stored as %s", y16.DType)
	}
	l16 := download(be, y16)
	for i := range l32 {
		if math.Abs(float64(l32[i]-l16[i])) > 0.05*(1+math.Abs(float64(l32[i]))) {
			t.Errorf("logit %d: fp16 %.4g, fp32 %.4g", i, l16[i], l32[i])
		}
	}
}
