package data

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// extractCIFAR writes the six batches of the tarball into dir. Only the
// known file names are written (by base name), so entry paths in the
// archive can never place files elsewhere. Each file goes through a
// temporary name, so a failed extraction leaves no complete-looking batch;
// made records the folders and files it creates.
func extractCIFAR(tarball, dir string, made *created) error {
	f, err := os.Open(tarball)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return gzipError(tarball, err)
	}
	if err := made.mkdirAll(dir); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	names := cifarFiles()
	tr := tar.NewReader(gz)
	for done := 0; done < len(names); {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return tarError(tarball, err)
		}
		base := path.Base(hdr.Name)
		if hdr.Typeflag != tar.TypeReg || !slices.Contains(names, base) {
			continue
		}
		if err := checkCIFARSize(hdr.Size, tarball+":"+hdr.Name); err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, base), tarball+":"+hdr.Name, io.LimitReader(tr, hdr.Size), hdr.Size, made); err != nil {
			return err
		}
		done++
	}
	if !hasAll(dir, names) {
		return &FormatError{File: tarball, Offset: -1, Expected: "tar entries for all of data_batch_1..5.bin, test_batch.bin",
			Found: "some missing"}
	}
	return nil
}

// writeFileAtomic copies size bytes of r (named src in errors) to dst,
// recorded in made when it is new.
func writeFileAtomic(dst, src string, r io.Reader, size int64, made *created) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, r)
	if err != nil {
		return cifarReadError(src, n, size, err)
	}
	if n != size {
		return cifarReadError(src, n, size, io.ErrUnexpectedEOF)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	made.file(dst)
	return os.Rename(tmp.Name(), dst)
}
