package torchfmt

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTorchInterop has real PyTorch load what we write and checks we read back
// what it saves. It needs python3 with torch and torchvision (the GPU device
// machine has them); elsewhere it skips, and testdata/check_torch.py can be run
// there by hand.
func TestTorchInterop(t *testing.T) {
	if out, err := exec.Command("python3", "-c", "import torch, torchvision, safetensors").CombinedOutput(); err != nil {
		t.Skipf("python3 with torch, torchvision and safetensors not available here (%v: %.200s); "+
			"run testdata/check_torch.py where torch is installed", err, out)
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("python3", append([]string{"testdata/check_torch.py"}, args...)...)
		out, err := cmd.CombinedOutput()
		t.Logf("check_torch.py %v:\n%s", args, out)
		if err != nil {
			t.Fatalf("check_torch.py failed: %v", err)
		}
	}
	run("keys", "testdata/resnet18_state_dict.txt")

	// Export: our ResNet-18 files load strictly into torchvision; import: torch's
	// re-save of the loaded model reads back identical.
	resnet := resnetStateDict(t, rand.New(rand.NewPCG(23, 24)))
	exchange(t, dir, "resnet18", resnet, run, "--model")

	// Every dtype and shape corner, without a model.
	exchange(t, dir, "mixed", sampleTensors(rand.New(rand.NewPCG(25, 26))), run)
}

func exchange(t *testing.T, dir, name string, ts []Tensor, run func(...string), extra ...string) {
	t.Helper()
	pth := filepath.Join(dir, name+".pth")
	st := filepath.Join(dir, name+".safetensors")
	back := filepath.Join(dir, name+"_torch.pth")
	if err := WriteFile(pth, ts); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(st, ts); err != nil {
		t.Fatal(err)
	}
	run(append([]string{"load", pth, "--safetensors", st, "--out", back}, extra...)...)
	got, err := ReadFile(back)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTensors(got, ts); d != "" {
		t.Fatalf("%s: torch's re-save differs from what we wrote: %s", name, d)
	}
	if os.Getenv("TORCHFMT_KEEP") != "" { // for inspecting torch's output by hand
		data, _ := os.ReadFile(back)
		os.WriteFile(filepath.Join(os.Getenv("TORCHFMT_KEEP"), name+"_torch.pth"), data, 0o644)
	}
}
