package data

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"resnetlab/fsutil"
)

// fetchFMNIST makes Fashion-MNIST available under root. It is never
// downloaded: a copy already under root is verified (loaded) and named;
// with named (the user gave root, as torchvision's root=) and none there,
// the Debian package's files are copied into root/FashionMNIST/raw and
// verified there, so `run --data root` finds them; with the default root the
// system copy is used where it is, and the line says so and why.
func fetchFMNIST(root string, named bool, logf func(string, ...any)) (err error) {
	train, test, err := loadFashionMNIST(root, 1, named)
	var nf *NotFoundError
	if errors.As(err, &nf) && named && len(missingFMNIST(SystemFashionMNISTDir)) == 0 {
		return copySystemFMNIST(root, logf)
	}
	if errors.As(err, &nf) {
		return fmt.Errorf("data: fashion-mnist is not downloaded by resnetlab: %s (searched %s)",
			nf.Hint, strings.Join(nf.Searched, ", "))
	}
	if err != nil {
		return err
	}
	if !named && train.Source == SystemFashionMNISTDir {
		logf("fashion-mnist: available in %s (the system copy; %d training, %d test images): no folder under the default root %s holds it, "+
			"so runs without a data_dir read it from there; `--root DIR` copies it into DIR", train.Source, train.N, test.N, root)
		return nil
	}
	logf("fashion-mnist: already available in %s (%d training, %d test images)", train.Source, train.N, test.N)
	return nil
}

// copySystemFMNIST writes the system copy's four files, uncompressed, into
// root/FashionMNIST/raw and loads them from there; on any failure it
// removes what it created.
func copySystemFMNIST(root string, logf func(string, ...any)) (err error) {
	dst := filepath.Join(root, "FashionMNIST", "raw")
	var made created
	defer func() {
		if err != nil {
			made.remove()
		}
	}()
	if err := made.mkdirAll(dst); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	logf("fashion-mnist: copying the system copy %s into %s (torchvision's layout)", SystemFashionMNISTDir, dst)
	for _, base := range []string{fmnistBase.trainImages, fmnistBase.trainLabels, fmnistBase.testImages, fmnistBase.testLabels} {
		src, out := findIdx(SystemFashionMNISTDir, base), filepath.Join(dst, base)
		made.file(out)
		if err := fsutil.WriteFileNew(out, func(w io.Writer) error { return gunzipTo(w, src) }); err != nil {
			return fmt.Errorf("data: fashion-mnist: copying %s: %w", src, err)
		}
	}
	train, test, err := loadFashionMNIST(root, 1, true)
	if err != nil {
		return err
	}
	if train.Source != dst {
		return fmt.Errorf("data: fashion-mnist copied into %s but loaded from %s", dst, train.Source)
	}
	logf("fashion-mnist: available in %s (%d training, %d test images)", dst, train.N, test.N)
	return nil
}

// gunzipTo writes the idx file src to w, uncompressed when it is gzipped,
// at most MaxIdxBytes plus a header's worth.
func gunzipTo(w io.Writer, src string) error {
	f, err := fsutil.OpenRegular(src)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return gzipError(src, err)
		}
		r = gz
	}
	const limit = MaxIdxBytes + 1<<10
	n, err := io.Copy(w, io.LimitReader(r, limit+1))
	if err != nil {
		return err
	}
	if n > limit {
		return fmt.Errorf("%s: more than %d bytes uncompressed", src, int64(limit))
	}
	return nil
}
