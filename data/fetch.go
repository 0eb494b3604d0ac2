package data

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// CIFAR10URL is where Fetch downloads CIFAR-10's binary version from, and
// CIFAR10MD5 its published digest.
var CIFAR10URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"

const CIFAR10MD5 = "c32a1d4ab5d03f1284b67883e8d87530"

// Fetch makes the named data set available under root. For cifar10 it
// downloads the tarball (to a temporary file renamed into place once its
// MD5 matches) and extracts the batches into root/cifar-10-batches-bin/;
// Fashion-MNIST cannot be downloaded here: Fetch finds it under root, or,
// with OnlyRoot (a root the user named, like torchvision's root=) and the
// Debian package installed, copies the package's files into
// root/FashionMNIST/raw (torchvision's layout, uncompressed), else says how
// to install it; synthetic needs nothing. A fetch that fails removes the
// folders and files it created. logf (may be nil) receives progress lines.
func Fetch(ctx context.Context, name, root string, logf func(string, ...any), opts ...Option) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var cfg loadConfig
	for _, o := range opts {
		o(&cfg)
	}
	canon, err := Canonical(name)
	if err != nil {
		return err
	}
	switch canon {
	case "cifar10":
		return fetchCIFAR(ctx, http.DefaultClient, CIFAR10URL, CIFAR10MD5, root, logf)
	case "fashion-mnist":
		return fetchFMNIST(root, cfg.onlyRoot, logf)
	}
	logf("synthetic: generated on the fly, nothing to fetch")
	return nil
}

func fetchCIFAR(ctx context.Context, client *http.Client, url, wantMD5, root string, logf func(string, ...any)) (err error) {
	dir := filepath.Join(root, CIFARDir)
	if hasAll(dir, cifarFiles()) {
		logf("cifar10: already extracted in %s", dir)
		return nil
	}
	if some := present(dir, cifarFiles()); len(some) > 0 {
		// Files this fetch did not make are never replaced: which copy is
		// right is the user's call.
		return fmt.Errorf("data: %s holds %s but not every batch file: move or delete them and fetch again", dir, strings.Join(some, ", "))
	}
	var made created
	defer func() {
		if err != nil {
			made.remove()
		}
	}()
	tarball := filepath.Join(root, CIFARTarball)
	if _, err := os.Stat(tarball); err == nil {
		logf("cifar10: checking existing %s", tarball)
		if err := checkMD5(tarball, wantMD5); err != nil {
			return fmt.Errorf("%w; delete it and fetch again", err)
		}
	} else if err := download(ctx, client, url, wantMD5, tarball, &made, logf); err != nil {
		return err
	}
	logf("cifar10: extracting into %s", dir)
	return extractCIFAR(tarball, dir, &made)
}

// present is which of names exist in dir (as anything).
func present(dir string, names []string) []string {
	var out []string
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func hasAll(dir string, names []string) bool {
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// download fetches url into dst through a temporary file in dst's folder,
// renamed into place only once the MD5 matches, so an interrupted or bad
// download never leaves a file that looks complete. made records the
// folders and the file it creates.
func download(ctx context.Context, client *http.Client, url, wantMD5, dst string, made *created, logf func(string, ...any)) (err error) {
	if err := made.mkdirAll(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer func() {
		tmp.Close()
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	logf("cifar10: downloading %s", url)
	sum, err := httpGet(ctx, client, url, tmp, logf)
	if err != nil {
		return fmt.Errorf("data: cannot download %s (%v); without network, fetch it elsewhere (md5 %s) and put it at %s, or its extracted %s/ folder in %s",
			url, err, wantMD5, dst, CIFARDir, filepath.Dir(dst))
	}
	if sum != wantMD5 {
		return fmt.Errorf("data: %s: md5 %s, expected %s (corrupt or wrong download; nothing was kept)", url, sum, wantMD5)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	made.file(dst)
	return os.Rename(tmp.Name(), dst)
}

// httpGet streams url's body into w and returns its hex MD5.
func httpGet(ctx context.Context, client *http.Client, url string, w io.Writer, logf func(string, ...any)) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP status %s", resp.Status)
	}
	h := md5.New()
	pw := &progressWriter{total: resp.ContentLength, logf: logf}
	if _, err := io.Copy(io.MultiWriter(w, h, pw), resp.Body); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// progressWriter logs every 16 MiB that goes through it.
type progressWriter struct {
	n, total int64
	logf     func(string, ...any)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	const step = 16 << 20
	if (p.n+int64(len(b)))/step > p.n/step {
		if p.total > 0 {
			p.logf("cifar10: %d of %d MiB", (p.n+int64(len(b)))>>20, p.total>>20)
		} else {
			p.logf("cifar10: %d MiB", (p.n+int64(len(b)))>>20)
		}
	}
	p.n += int64(len(b))
	return len(b), nil
}

func checkMD5(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	h := md5.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("data: %s: %w", path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("data: %s: md5 %s, expected %s", path, got, want)
	}
	return nil
}
