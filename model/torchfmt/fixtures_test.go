package torchfmt

import (
	"os"
	"slices"
	"testing"
)

// TestReadRealTorchFiles reads files written by real torch.save (torch 2.11, made
// by testdata/check_torch.py fixtures) and compares every tensor with the
// safetensors file the safetensors package wrote from the same values.
func TestReadRealTorchFiles(t *testing.T) {
	pairs := []struct {
		pth, st string
		keys    []string
	}{
		{"torch_small.pth", "torch_small.safetensors", smallKeys},
		{"torch_small_p4.pth", "torch_small.safetensors", smallKeys},
		{"torch_module.pth", "torch_module.safetensors", []string{"0.weight", "0.bias", "1.weight", "1.bias",
			"1.running_mean", "1.running_var", "1.num_batches_tracked"}},
	}
	for _, p := range pairs {
		got, err := ReadFile("testdata/torch/" + p.pth)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, g := range got {
			names = append(names, g.Name)
		}
		if !slices.Equal(names, p.keys) {
			t.Fatalf("%s: keys %v, want %v in torch's order", p.pth, names, p.keys)
		}
		want := readSTByName(t, "testdata/torch/"+p.st, names)
		if d := diffTensors(got, want); d != "" {
			t.Errorf("%s vs %s: %s", p.pth, p.st, d)
		}
	}
}

var smallKeys = []string{"f32", "f16", "bf16", "f16_special", "i64_scalar", "i64_vec", "base",
	"transposed", "row_slice", "strided", "param", "empty", "expanded"}

// readSTByName reads a safetensors file and orders its tensors like names (the
// safetensors package sorts its layout by dtype and name).
func readSTByName(t *testing.T, path string, names []string) []Tensor {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	ts, meta, err := ReadSafetensors(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	if meta["source"] == "" {
		t.Errorf("%s: metadata %v lacks the source written by check_torch.py", path, meta)
	}
	byName := map[string]Tensor{}
	for _, x := range ts {
		byName[x.Name] = x
	}
	var out []Tensor
	for _, n := range names {
		out = append(out, byName[n])
	}
	return out
}
