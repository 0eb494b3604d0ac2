package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"resnetlab/kernels"
)

func smallConfig(width int, seed uint64) Config {
	return Config{Width: width, InChannels: 3, NumClasses: 10, DType: kernels.F32, Seed: seed}
}

func images(be kernels.Backend, rng *rand.Rand, n, c, hw int) (*kernels.Tensor, []float32) {
	host := make([]float32, n*c*hw*hw)
	for i := range host {
		host[i] = rng.Float32() // like ToTensor: [0,1]
	}
	return upload(be, kernels.CatData, kernels.F32, host, n, c, hw, hw), host
}

func TestStateDictLayoutFullWidth(t *testing.T) {
	be := newBackend(t)
	m := NewResNet18(be, DefaultConfig())
	defer m.Free()
	if got := m.NumParams(); got != 11181642 {
		t.Errorf("NumParams = %d, want 11181642", got)
	}
	sd := m.StateDict()
	want := strings.Split(strings.TrimSpace(torchvisionResNet18Keys), "\n")
	if len(sd) != len(want) || len(sd) != 122 {
		t.Fatalf("state dict has %d entries, want %d (122)", len(sd), len(want))
	}
	counters := 0
	for i, line := range want {
		name, shape, _ := strings.Cut(line, " ")
		e := sd[i]
		if e.Name != name {
			t.Fatalf("entry %d is %q, want %q", i, e.Name, name)
		}
		if shape == "-" {
			counters++
			if len(e.Shape) != 0 || len(e.Int64) != 1 || e.Int64[0] != 0 || e.Data != nil {
				t.Errorf("%s: want int64 scalar 0, got shape %v int64 %v", name, e.Shape, e.Int64)
			}
			continue
		}
		if ws := parseShape(shape); !slices.Equal(e.Shape, ws) || len(e.Data) != kernels.NumElems(ws) {
			t.Errorf("%s: shape %v with %d values, want %v", name, e.Shape, len(e.Data), ws)
		}
	}
	if counters != 20 {
		t.Errorf("%d num_batches_tracked entries, want 20", counters)
	}
	// Params() is the state dict without buffers, in the same order.
	var wantParams []string
	for _, e := range sd {
		if !strings.Contains(e.Name, "running_") && !strings.HasSuffix(e.Name, "num_batches_tracked") {
			wantParams = append(wantParams, e.Name)
		}
	}
	var gotParams []string
	for _, p := range m.Params() {
		gotParams = append(gotParams, p.Name)
	}
	if !slices.Equal(gotParams, wantParams) {
		t.Errorf("Params order %v, want %v", gotParams, wantParams)
	}
}

// TestWidthMultiplier: width 4, 1 input channel and 7 classes give the
// torchvision layout with every channel count divided by 16.
func TestWidthMultiplier(t *testing.T) {
	be := newBackend(t)
	m := NewResNet18(be, Config{Width: 4, InChannels: 1, NumClasses: 7, DType: kernels.F32})
	defer m.Free()
	sd := m.StateDict()
	for i, line := range strings.Split(strings.TrimSpace(torchvisionResNet18Keys), "\n") {
		name, shape, _ := strings.Cut(line, " ")
		if shape == "-" {
			continue
		}
		want := parseShape(shape)
		switch name {
		case "conv1.weight":
			want = []int{4, 1, 7, 7}
		case "fc.weight":
			want = []int{7, 32}
		case "fc.bias":
			want = []int{7}
		default:
			want[0] /= 16
			if len(want) == 4 {
				want[1] /= 16
			}
		}
		if sd[i].Name != name || !slices.Equal(sd[i].Shape, want) {
			t.Errorf("entry %d: %s %v, want %s %v", i, sd[i].Name, sd[i].Shape, name, want)
		}
	}
}

func parseShape(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// TestFullWidthEvalMatchesReference runs the real model on 2 images in eval
// mode with random BN statistics and affine parameters (loaded through
// LoadStateDict) and compares logits with the float64 reference; it also
// checks the activation sizes 16 (stem), 8 (max-pool), 8/4/2/1 (stages).
func TestFullWidthEvalMatchesReference(t *testing.T) {
	be := newBackend(t)
	m := NewResNet18(be, DefaultConfig())
	defer m.Free()
	rng := rand.New(rand.NewPCG(11, 11))
	sd := m.StateDict()
	for _, e := range sd {
		bnParam := len(e.Shape) == 1 && !strings.HasPrefix(e.Name, "fc.")
		switch {
		case strings.HasSuffix(e.Name, "running_mean"), bnParam && strings.HasSuffix(e.Name, ".bias"):
			fillRand(rng, e.Data, -0.2, 0.2)
		case strings.HasSuffix(e.Name, "running_var"), bnParam && strings.HasSuffix(e.Name, ".weight"):
			fillRand(rng, e.Data, 0.5, 1.5)
		}
	}
	if err := m.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	x, host := images(be, rng, 2, 3, 32)
	defer be.Free(x)
	logits := m.Forward(x, false)
	if !slices.Equal(logits.Shape, []int{2, 10}) {
		t.Fatalf("logits shape %v, want [2 10]", logits.Shape)
	}
	sizes := []int{m.Conv1.y.Shape[2], m.MaxPool.y.Shape[2]}
	for _, i := range []int{1, 3, 5, 7} {
		sizes = append(sizes, m.Blocks[i].BN2.y.Shape[2])
	}
	if !slices.Equal(sizes, []int{16, 8, 8, 4, 2, 1}) {
		t.Errorf("spatial sizes stem, pool, stages = %v, want [16 8 8 4 2 1]", sizes)
	}
	_, want := refLogits(sd, false, host, 2, 32)
	compareLogits(t, be, logits, want, 1e-3)
}

func fillRand(rng *rand.Rand, v []float32, lo, hi float64) {
	for i := range v {
		v[i] = float32(lo + (hi-lo)*rng.Float64())
	}
}

func refLogits(sd []NamedTensor, train bool, host []float32, n, hw int) (*refNet, [][]float64) {
	r := newRefNet(sd, train)
	x := newT4(n, 3, hw, hw)
	for i, v := range host {
		x.d[i] = float64(v)
	}
	return r, r.forward(x)
}

// compareLogits accepts |got-want| <= tol * (1 + max|want|).
func compareLogits(t *testing.T, be kernels.Backend, logits *kernels.Tensor, want [][]float64, tol float64) {
	t.Helper()
	got := download(be, logits)
	scale := 1.0
	for _, row := range want {
		for _, v := range row {
			scale = math.Max(scale, math.Abs(v))
		}
	}
	for n, row := range want {
		for k, v := range row {
			if g := float64(got[n*len(row)+k]); math.Abs(g-v) > tol*scale {
				t.Errorf("logit[%d][%d] = %.6g, reference %.6g", n, k, g, v)
			}
		}
	}
}

// TestTrainForwardMatchesReference checks train-mode BN (batch statistics)
// and the running-statistics update against the reference, width 8.
func TestTrainForwardMatchesReference(t *testing.T) {
	be := newBackend(t)
	m := NewResNet18(be, smallConfig(8, 3))
	defer m.Free()
	rng := rand.New(rand.NewPCG(12, 12))
	x, host := images(be, rng, 4, 3, 32)
	defer be.Free(x)
	before := m.StateDict()
	logits := m.Forward(x, true)
	r, want := refLogits(before, true, host, 4, 32)
	compareLogits(t, be, logits, want, 1e-3)
	for _, e := range m.StateDict() {
		if strings.HasSuffix(e.Name, "num_batches_tracked") {
			if e.Int64[0] != 1 {
				t.Errorf("%s = %d after one train forward, want 1", e.Name, e.Int64[0])
			}
			continue
		}
		ws, ok := r.stats[e.Name]
		if !ok {
			continue
		}
		for i, v := range ws {
			if math.Abs(float64(e.Data[i])-v) > 1e-4*(1+math.Abs(v)) {
				t.Fatalf("%s[%d] = %.6g after train forward, reference %.6g", e.Name, i, e.Data[i], v)
			}
		}
	}
}
