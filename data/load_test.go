package data

import (
	"bytes"
	"path/filepath"
	"testing"
)

func TestRoot(t *testing.T) {
	t.Setenv("DATA", "")
	if Root() != "./data" {
		t.Fatalf("Root() = %q with DATA unset, want ./data", Root())
	}
	t.Setenv("DATA", "/x/y")
	if Root() != "/x/y" {
		t.Fatalf("Root() = %q with DATA=/x/y", Root())
	}
}

func TestLoadDispatch(t *testing.T) {
	noSystemDir(t)
	root := t.TempDir()
	set := makeCIFARSet(1)
	writeFiles(t, filepath.Join(root, CIFARDir), set.files)
	files, _, _ := fmnistFiles(t, 3, 2, false)
	writeFiles(t, root, files)

	train, _, err := Load("CIFAR-10", root)
	if err != nil || !bytes.Equal(train.Images, set.train.Images) {
		t.Fatalf("cifar10: err %v", err)
	}
	train, test, err := Load("fashion-mnist", root, Channels(1))
	if err != nil || train.C != 1 || train.N != 3 || test.N != 2 {
		t.Fatalf("fashion-mnist: err %v", err)
	}
	if train, _, _ = Load("fmnist", root); train.C != 3 {
		t.Fatalf("fashion-mnist default channels %d, want 3", train.C)
	}
	train, test, err = Load("synthetic", "/nonexistent", SyntheticSize(40, 20), Seed(6))
	want, _ := Synthetic(40, 20, 6)
	if err != nil || train.N != 40 || test.N != 20 || !bytes.Equal(train.Images, want.Images) {
		t.Fatalf("synthetic: err %v", err)
	}
	_, _, err = Load("mnist", root)
	wantErr(t, err, `"mnist"`, "cifar10, fashion-mnist, synthetic")
}

func TestValidate(t *testing.T) {
	ds, _ := Synthetic(20, 0, 1)
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	ds.Labels[7] = 10
	wantErr(t, ds.Validate(), "label 10 of sample 7")
	ds.Labels[7] = 0
	ds.Images = ds.Images[:100]
	wantErr(t, ds.Validate(), "100 image bytes")
}
