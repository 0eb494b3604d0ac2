package data

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func serve(t *testing.T, body []byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cifar-10-binary.tar.gz" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func TestFetchCIFARDownloadsVerifiesExtracts(t *testing.T) {
	set := makeCIFARSet(2)
	tgz := tarGz(t, CIFARDir, cifarFiles(), set.files)
	srv := serve(t, tgz)
	root := filepath.Join(t.TempDir(), "data")
	var log []string
	logf := func(f string, a ...any) { log = append(log, f) }
	err := fetchCIFAR(context.Background(), srv.Client(), srv.URL+"/cifar-10-binary.tar.gz", md5hex(tgz), root, logf)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, CIFARTarball)); md5hex(got) != md5hex(tgz) {
		t.Fatal("tarball in root differs from the served file")
	}
	for name, want := range set.files {
		got, err := os.ReadFile(filepath.Join(root, CIFARDir, name))
		if err != nil || string(got) != string(want) {
			t.Fatalf("extracted %s differs (err %v)", name, err)
		}
	}
	train, _, err := LoadCIFAR10(root)
	if err != nil {
		t.Fatal(err)
	}
	sameData(t, "train", train, set.train)
	leftovers, _ := filepath.Glob(filepath.Join(root, ".*"))
	leftovers2, _ := filepath.Glob(filepath.Join(root, CIFARDir, ".*"))
	if len(leftovers)+len(leftovers2) > 0 {
		t.Fatalf("temporary files left: %v %v", leftovers, leftovers2)
	}
	// A second fetch finds the extracted set and does not download.
	srv.Close()
	if err := fetchCIFAR(context.Background(), srv.Client(), srv.URL+"/cifar-10-binary.tar.gz", md5hex(tgz), root, logf); err != nil {
		t.Fatalf("second fetch: %v", err)
	}
}

func TestFetchCIFARDigestMismatch(t *testing.T) {
	srv := serve(t, []byte("not the real CIFAR-10 tarball"))
	old := CIFAR10URL
	CIFAR10URL = srv.URL + "/cifar-10-binary.tar.gz"
	t.Cleanup(func() { CIFAR10URL = old })
	root := t.TempDir()
	err := Fetch(context.Background(), "cifar10", root, nil)
	wantErr(t, err, "md5 "+md5hex([]byte("not the real CIFAR-10 tarball")), "expected "+CIFAR10MD5)
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("a failed download left %v in root", entries)
	}
}

func TestFetchCIFARExistingTarball(t *testing.T) {
	set := makeCIFARSet(1)
	tgz := tarGz(t, CIFARDir, cifarFiles(), set.files)
	root := t.TempDir()
	writeFiles(t, root, map[string][]byte{CIFARTarball: tgz})
	dead := "http://127.0.0.1:1/none" // must not be contacted
	if err := fetchCIFAR(context.Background(), http.DefaultClient, dead, md5hex(tgz), root, func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadCIFAR10(root); err != nil {
		t.Fatal(err)
	}
	err := fetchCIFAR(context.Background(), http.DefaultClient, dead, CIFAR10MD5, t.TempDir(), func(string, ...any) {})
	wantErr(t, err, "cannot download")
	root2 := t.TempDir()
	writeFiles(t, root2, map[string][]byte{CIFARTarball: []byte("junk")})
	err = fetchCIFAR(context.Background(), http.DefaultClient, dead, CIFAR10MD5, root2, func(string, ...any) {})
	wantErr(t, err, filepath.Join(root2, CIFARTarball), "expected "+CIFAR10MD5, "delete it")
}

func TestFetchCIFARNoNetwork(t *testing.T) {
	srv := serve(t, nil)
	url := srv.URL + "/cifar-10-binary.tar.gz"
	srv.Close() // connection refused, like a machine without network
	root := t.TempDir()
	err := fetchCIFAR(context.Background(), http.DefaultClient, url, CIFAR10MD5, root, quiet)
	wantErr(t, err, "cannot download", filepath.Join(root, CIFARTarball), CIFAR10MD5, CIFARDir)
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error spans several lines: %q", err)
	}
	srv404 := serve(t, nil)
	err = fetchCIFAR(context.Background(), srv404.Client(), srv404.URL+"/missing", CIFAR10MD5, root, quiet)
	wantErr(t, err, "404")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = fetchCIFAR(ctx, srv404.Client(), srv404.URL+"/cifar-10-binary.tar.gz", CIFAR10MD5, root, quiet)
	wantErr(t, err, "canceled")
}

func quiet(string, ...any) {}

func TestFetchOtherSets(t *testing.T) {
	noSystemDir(t)
	root := t.TempDir()
	wantErr(t, Fetch(context.Background(), "fashion-mnist", root, nil), "apt-get install dataset-fashion-mnist", root)
	files, _, _ := fmnistFiles(t, 2, 2, true)
	writeFiles(t, root, files)
	var said string
	logf := func(f string, a ...any) { said += fmt.Sprintf(f, a...) }
	if err := Fetch(context.Background(), "fmnist", root, logf); err != nil {
		t.Fatalf("fashion-mnist present: %v", err)
	}
	if !strings.Contains(said, "already available in "+root) {
		t.Errorf("fetch of a present fashion-mnist says %q, want the directory %s", said, root)
	}
	if err := Fetch(context.Background(), "synthetic", root, nil); err != nil {
		t.Fatal(err)
	}
	wantErr(t, Fetch(context.Background(), "imagenet", root, nil), "imagenet", "cifar10, fashion-mnist, synthetic")
}
