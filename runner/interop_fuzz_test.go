package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"resnetlab/ckpt"
	"resnetlab/spec"
	"testing"

	"resnetlab/data"
	"resnetlab/model/torchfmt"
)

// FuzzImportMetadata builds valid safetensors and .pth containers around a
// tiny resnet18 state dict with fuzzed metadata values (what a resnetlab
// export records and import trusts), and imports them: no panic, and an
// import that succeeds records only a known data set and an in-range
// synthetic test set, readable back as a checkpoint.
func FuzzImportMetadata(f *testing.F) {
	f.Add(false, "synthetic", "40", "5", "")
	f.Add(true, "synthetic", "40", "5", "")
	f.Add(true, "fmnist", "", "", "x")
	f.Add(false, "cifar10", "0", "-1", "")
	f.Add(true, "synthetic", "99999999999999999999", "7", "")
	f.Add(false, "imagenet", "12", "x", "\x00")
	f.Add(true, "", "-3", "", "{}")
	ts := torchTensors(testStateDict(f, 1, 3))
	f.Fuzz(func(t *testing.T, pth bool, dataset, synTest, synSeed, extra string) {
		md := map[string]string{"dataset": dataset, "synthetic_test": synTest, "synthetic_seed": synSeed, extra: extra}
		var buf bytes.Buffer
		var err error
		name := "in.safetensors"
		if pth {
			name, err = "in.pth", torchfmt.WritePthMeta(&buf, ts, md)
		} else {
			err = torchfmt.WriteSafetensors(&buf, ts, md)
		}
		if err != nil {
			t.Skip(err) // a map the writers refuse is not an input to import
		}
		dir := t.TempDir()
		in := filepath.Join(dir, name)
		if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		ck := filepath.Join(dir, "ck")
		if err := ImportModel(in, ck, 1, ImportOptions{}); err != nil {
			return
		}
		mp, _, _ := ckpt.Paths(ck, 1)
		_, meta, err := ckpt.ReadMeta(mp)
		if err != nil {
			t.Fatalf("import succeeded but its checkpoint does not read: %v", err)
		}
		if ds, _ := ckpt.MetaString(meta, "dataset"); ds != "" {
			if canon, err := data.Canonical(ds); err != nil || canon != ds {
				t.Fatalf("imported data set %q is not canonical", ds)
			}
		}
		if n, _ := ckpt.MetaInt(meta, "synthetic_test"); n < 0 || n > spec.MaxImages {
			t.Fatalf("imported synthetic_test %d out of range", n)
		}
	})
}
