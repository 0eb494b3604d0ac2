package torchfmt

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"testing"
)

// cpythonLoader unpickles data.pkl with CPython's own Unpickler, standing in for
// torch with stub modules that record what torch would be called with.
const cpythonLoader = `
import sys, types, pickle, json
torch = types.ModuleType("torch"); utils = types.ModuleType("torch._utils")
for n in ("FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage"):
    setattr(torch, n, type(n, (), {}))
def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks):
    return {"storage": storage, "offset": offset, "size": list(size), "stride": list(stride),
            "requires_grad": requires_grad, "hooks": type(hooks).__name__ + str(len(hooks))}
utils._rebuild_tensor_v2 = _rebuild_tensor_v2
torch._utils = utils
sys.modules["torch"] = torch; sys.modules["torch._utils"] = utils
class U(pickle.Unpickler):
    def persistent_load(self, pid):
        kind, cls, key, loc, numel = pid
        return [kind, cls.__name__, key, loc, numel]
obj = U(sys.stdin.buffer).load()
print(json.dumps({"type": type(obj).__name__, "items": [[k, v] for k, v in obj.items()]}))
`

type cpyTensor struct {
	Storage      []any `json:"storage"`
	Offset       int   `json:"offset"`
	Size, Stride []int
	RequiresGrad bool   `json:"requires_grad"`
	Hooks        string `json:"hooks"`
}

// TestPicklerOutputLoadsInCPython checks our data.pkl against CPython's unpickler
// (python3 without torch suffices); it skips where there is no python3.
func TestPicklerOutputLoadsInCPython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found; CPython cross-check skipped")
	}
	ts := sampleTensors(rand.New(rand.NewPCG(17, 18)))
	data := writePthBytes(t, ts)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-c", cpythonLoader)
	cmd.Stdin = bytes.NewReader(readEntry(t, zr.File[0]))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("CPython failed to unpickle data.pkl: %v\n%s", err, out)
	}
	var got struct {
		Type  string
		Items [][2]json.RawMessage
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Type != "OrderedDict" || len(got.Items) != len(ts) {
		t.Fatalf("CPython sees a %s of %d items, want OrderedDict of %d", got.Type, len(got.Items), len(ts))
	}
	classes := map[string]string{F32: "FloatStorage", F16: "HalfStorage", BF16: "BFloat16Storage", I64: "LongStorage"}
	for i, tt := range ts {
		var name string
		var v cpyTensor
		json.Unmarshal(got.Items[i][0], &name)
		if err := json.Unmarshal(got.Items[i][1], &v); err != nil {
			t.Fatal(err)
		}
		wantStorage := []any{"storage", classes[tt.DType], strconv.Itoa(i), "cpu", float64(tt.Numel())}
		shape := tt.Shape
		if shape == nil {
			shape = []int{}
		}
		if name != tt.Name || !slices.Equal(v.Storage, wantStorage) || v.Offset != 0 ||
			!slices.Equal(v.Size, shape) || !slices.Equal(v.Stride, contiguousStrides(shape)) ||
			v.RequiresGrad || v.Hooks != "OrderedDict0" {
			t.Errorf("item %d: CPython sees %s = %+v; want %s over %v", i, name, v, tt.Name, wantStorage)
		}
	}
}
