package data

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree lists every path under dir (relative), dir itself left out.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// A fetch without network removes the folders it made for the download
// (the default ./data included), and leaves a folder that was there, and
// what is in it, as it was.
func TestFetchCIFARFailureRemovesWhatItCreated(t *testing.T) {
	srv := serve(t, nil)
	url := srv.URL + "/cifar-10-binary.tar.gz"
	srv.Close()
	base := t.TempDir()
	root := filepath.Join(base, "a", "data")
	err := fetchCIFAR(context.Background(), http.DefaultClient, url, CIFAR10MD5, root, quiet)
	wantErr(t, err, "cannot download")
	if got := tree(t, base); len(got) != 0 {
		t.Fatalf("a failed fetch left %v in %s", got, base)
	}
	// An existing root with a file of the user's stays as it was.
	writeFiles(t, root, map[string][]byte{"notes.txt": []byte("mine")})
	err = fetchCIFAR(context.Background(), http.DefaultClient, url, CIFAR10MD5, root, quiet)
	wantErr(t, err, "cannot download")
	if got := tree(t, base); strings.Join(got, " ") != filepath.Join("a")+" "+filepath.Join("a", "data")+" "+filepath.Join("a", "data", "notes.txt") {
		t.Fatalf("after a failed fetch into an existing root: %v", got)
	}
	// A download that verifies but whose extraction fails (a batch missing
	// from the archive) removes the tarball and the batch folder it made.
	set := makeCIFARSet(1)
	tgz := tarGz(t, CIFARDir, cifarFiles()[:5], set.files)
	ok := serve(t, tgz)
	root2 := filepath.Join(t.TempDir(), "data")
	err = fetchCIFAR(context.Background(), ok.Client(), ok.URL+"/cifar-10-binary.tar.gz", md5hex(tgz), root2, quiet)
	wantErr(t, err, "some missing")
	if _, serr := os.Stat(root2); !os.IsNotExist(serr) {
		t.Fatalf("failed extraction left %v (stat %v)", tree(t, root2), serr)
	}
	// Through Fetch, as `resnetlab data fetch cifar10` runs it offline.
	old := CIFAR10URL
	CIFAR10URL = url
	t.Cleanup(func() { CIFAR10URL = old })
	root3 := filepath.Join(t.TempDir(), "data")
	wantErr(t, Fetch(context.Background(), "cifar10", root3, nil), "cannot download")
	if _, serr := os.Stat(root3); !os.IsNotExist(serr) {
		t.Fatalf("offline fetch left %s behind", root3)
	}
}

// fetch fashion-mnist --root X with the Debian package installed puts the
// data in X, like torchvision's root=: uncompressed, in torchvision's
// X/FashionMNIST/raw, where a run with data_dir = X finds it.
func TestFetchFashionMNISTNamedRootCopiesSystemCopy(t *testing.T) {
	files, img, _ := fmnistFiles(t, 3, 2, true)
	systemCopy(t, files)
	root := filepath.Join(t.TempDir(), "datasets")
	var said []string
	logf := func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }
	if err := Fetch(context.Background(), "fashion-mnist", root, logf, OnlyRoot()); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(root, "FashionMNIST", "raw")
	if last := said[len(said)-1]; !strings.Contains(last, "available in "+raw) || !strings.Contains(last, "3 training, 2 test") {
		t.Fatalf("fetch said %q, want the folder %s and the counts", said, raw)
	}
	got, err := os.ReadFile(filepath.Join(raw, fmnistBase.trainImages))
	if err != nil || !bytes.Equal(got, idxBytes([]int{3, 28, 28}, img)) {
		t.Fatalf("copied %s is not the uncompressed idx file (%v)", fmnistBase.trainImages, err)
	}
	train, _, err := Load("fashion-mnist", root, Channels(1), OnlyRoot())
	if err != nil || train.Source != raw || train.N != 3 {
		t.Fatalf("load from the named root: %v (%v), want 3 images from %s", train, err, raw)
	}
	// Again: already there, nothing copied.
	said = nil
	if err := Fetch(context.Background(), "fashion-mnist", root, logf, OnlyRoot()); err != nil ||
		len(said) != 1 || !strings.Contains(said[0], "already available in "+raw) {
		t.Fatalf("second fetch: %v, said %q", err, said)
	}
	// The default root (no --root) uses the system copy where it is and says so.
	said = nil
	def := t.TempDir()
	if err := Fetch(context.Background(), "fashion-mnist", def, logf); err != nil ||
		len(said) != 1 || !strings.Contains(said[0], SystemFashionMNISTDir) || !strings.Contains(said[0], "--root") {
		t.Fatalf("default root: %v, said %q, want the system folder named and --root offered", err, said)
	}
	if got := tree(t, def); len(got) != 0 {
		t.Fatalf("default root fetch wrote %v", got)
	}
}

// A named root without the data and no system copy is an error that leaves
// nothing behind; a system copy that fails verification is removed from
// the named root again, the root the user had left as it was.
func TestFetchFashionMNISTNamedRootFailureLeavesNothing(t *testing.T) {
	noSystemDir(t)
	base := t.TempDir()
	root := filepath.Join(base, "x")
	wantErr(t, Fetch(context.Background(), "fashion-mnist", root, nil, OnlyRoot()), "apt-get install dataset-fashion-mnist", root)
	if got := tree(t, base); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
	files, _, _ := fmnistFiles(t, 3, 2, true)
	files[fmnistBase.testLabels+".gz"] = gzipBytes(t, idxBytes([]int{2}, []byte{1, 12}))
	systemCopy(t, files)
	writeFiles(t, root, map[string][]byte{"notes.txt": []byte("mine")})
	err := Fetch(context.Background(), "fashion-mnist", root, nil, OnlyRoot())
	wantFormatErr(t, err, 9, fmnistBase.testLabels, "label 12 of sample 1")
	if got := tree(t, root); len(got) != 1 || got[0] != "notes.txt" {
		t.Fatalf("failed copy left %v in %s, want only notes.txt", got, root)
	}
}

// A batch folder that holds some of the batch files (not all) is refused
// before any download, and nothing in it is replaced or removed.
func TestFetchCIFARRefusesAPartialFolder(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, CIFARDir)
	writeFiles(t, dir, map[string][]byte{"data_batch_2.bin": []byte("mine"), "test_batch.bin": []byte("also mine")})
	before := tree(t, root)
	err := fetchCIFAR(context.Background(), http.DefaultClient, "http://127.0.0.1:1/never", CIFAR10MD5, root, quiet)
	wantErr(t, err, dir+" holds data_batch_2.bin, test_batch.bin but not every batch file")
	if got := tree(t, root); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Fatalf("a refused fetch changed %v into %v", before, got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data_batch_2.bin")); string(b) != "mine" {
		t.Fatalf("data_batch_2.bin now holds %q", b)
	}
}
