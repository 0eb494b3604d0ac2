package runner

import (
	"context"
	"os"
	"path/filepath"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
	"slices"
	"strings"
	"testing"
)

// dirEntries lists every path under root, to show that a refused export
// created, removed and changed nothing.
func dirEntries(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p+" "+fi.Mode().String()+" "+fi.ModTime().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// An export refuses, in one line naming the path, to write into a
// directory that does not exist (creating nothing), over an existing file
// or dangling link (leaving it as it was), or under a file; it reads no
// checkpoint first and leaves no temporary file.
func TestExportRefusesBadTargets(t *testing.T) {
	src := t.TempDir()
	writeTestCheckpoint(t, src, 2, testStateDict(t, 2, 3), syntheticMeta(2))
	tmp := t.TempDir()
	old := filepath.Join(tmp, "old.safetensors")
	if err := os.WriteFile(old, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link.pth")
	if err := os.Symlink(filepath.Join(tmp, "elsewhere.pth"), link); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(tmp, "no", "such")
	cases := []struct{ out, want string }{
		{filepath.Join(missing, "m.safetensors"), "export to " + filepath.Join(missing, "m.safetensors") +
			": directory " + missing + " does not exist; create it first"},
		{old, old + " already exists; remove it or choose another file name"},
		{link, link + " already exists; remove it or choose another file name"},
		{filepath.Join(old, "m.pth"), "export to " + filepath.Join(old, "m.pth") + ": " + old + " is not a directory"},
	}
	before := dirEntries(t, tmp)
	for _, c := range cases {
		err := ExportModel(src, 0, "", c.out)
		if err == nil || err.Error() != c.want {
			t.Errorf("export to %s: %v, want %q", c.out, err, c.want)
		}
		if after := dirEntries(t, tmp); !slices.Equal(after, before) {
			t.Errorf("export to %s changed the disk:\nbefore %q\nafter  %q", c.out, before, after)
		}
	}
	if b, _ := os.ReadFile(old); string(b) != "precious" {
		t.Errorf("existing file now holds %d bytes, starting %q", len(b), b[:min(len(b), 16)])
	}
	// The check comes before the checkpoint is read: a missing one is not
	// what the error is about.
	if err := ExportModel(filepath.Join(tmp, "nockpt"), 0, "", old); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("existing output and no checkpoint: %v, want 'already exists'", err)
	}
}

// A successful export leaves exactly the one file, readable by others
// like any file the user writes, and no temporary file beside it.
func TestExportLeavesOneFile(t *testing.T) {
	src := t.TempDir()
	writeTestCheckpoint(t, src, 1, testStateDict(t, 2, 5), syntheticMeta(2))
	tmp := t.TempDir()
	out := filepath.Join(tmp, "m.pth")
	if err := ExportModel(src, 1, "", out); err != nil {
		t.Fatal(err)
	}
	names, _ := os.ReadDir(tmp)
	if len(names) != 1 || names[0].Name() != "m.pth" {
		t.Fatalf("directory holds %v, want only m.pth", names)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
}

// eval of a model on a data set of another channel count is refused in one
// line naming both, not a panic in the first convolution.
func TestEvalRefusesOtherChannels(t *testing.T) {
	m := model.NewResNet18(cpu.New(), model.Config{Width: 2, InChannels: 1, NumClasses: 10, DType: kernels.F32, Seed: 3})
	sd := m.StateDict()
	m.Free()
	meta := syntheticMeta(2)
	meta.InChannels, meta.Dataset = 1, "fashion-mnist"
	dir := t.TempDir()
	writeTestCheckpoint(t, dir, 1, sd, meta)
	_, _, err := Eval(context.Background(), EvalOptions{CheckpointDir: dir, Epoch: 1, Dataset: "synthetic", Device: "cpu"})
	if err == nil || !strings.Contains(err.Error(), "1-channel images") || !strings.Contains(err.Error(), "synthetic has 3 channels") {
		t.Fatalf("got %v, want a refusal naming both channel counts", err)
	}
}
