package torchfmt

import (
	"slices"
	"testing"
)

func TestTorchvisionResNet18KeysMatchGolden(t *testing.T) {
	keys := TorchvisionResNet18Keys()
	golden := readGolden(t)
	if len(keys) != 122 || len(golden) != 122 {
		t.Fatalf("%d keys and %d golden lines, want 122", len(keys), len(golden))
	}
	for i, g := range golden {
		if keys[i] != g.name {
			t.Fatalf("key %d is %s, golden says %s", i, keys[i], g.name)
		}
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(keys) {
		t.Fatal("duplicate keys")
	}
}

// TestGoldenParameterCount checks the golden shapes add up to torchvision's
// resnet18(num_classes=10) size: 11,181,642 parameters (SPEC: ~11.2M).
func TestGoldenParameterCount(t *testing.T) {
	params := 0
	for _, g := range readGolden(t) {
		n, _ := numel(g.shape)
		if g.dtype == F32 && !slices.Contains([]string{"running_mean", "running_var"}, suffix(g.name)) {
			params += n
		}
	}
	if params != 11181642 {
		t.Fatalf("golden shapes hold %d parameters, want 11181642", params)
	}
}

func suffix(key string) string {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '.' {
			return key[i+1:]
		}
	}
	return key
}
