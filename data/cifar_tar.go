package data

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"resnetlab/fsutil"
	"slices"
	"strings"
)

// loadCIFARTar reads the batches straight out of cifar-10-binary.tar.gz,
// whatever folder they sit in inside the archive.
func loadCIFARTar(file string) (train, test *Dataset, err error) {
	f, err := fsutil.OpenRegular(file)
	if err != nil {
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	parts, err := readCIFARTar(f, file)
	if err != nil {
		return nil, nil, err
	}
	return assembleCIFAR(parts, func(i int) string { return file + ":" + cifarFiles()[i] })
}

// readCIFARTar returns the six batches in cifarFiles order.
func readCIFARTar(r io.Reader, file string) ([]*Dataset, error) {
	gz, err := gzip.NewReader(bufio.NewReaderSize(r, 1<<16))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &FormatError{File: file, Offset: 0, Expected: "a gzip stream", Found: "an empty or truncated file"}
		}
		return nil, gzipError(file, err)
	}
	names := cifarFiles()
	parts := make([]*Dataset, len(names))
	found := 0
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, tarError(file, err)
		}
		i := slices.Index(names, path.Base(hdr.Name))
		if i < 0 || hdr.Typeflag != tar.TypeReg || parts[i] != nil {
			continue
		}
		if parts[i], err = ReadCIFARBatch(tr, hdr.Size, file+":"+hdr.Name); err != nil {
			return nil, err
		}
		found++
	}
	// Read to the end of the gzip stream: only there does gzip check its CRC.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return nil, tarError(file, err)
	}
	if found < len(names) {
		var missing []string
		for i, p := range parts {
			if p == nil {
				missing = append(missing, names[i])
			}
		}
		return nil, &FormatError{File: file, Offset: -1,
			Expected: "tar entries " + strings.Join(names, ", "),
			Found:    "no " + strings.Join(missing, ", ")}
	}
	return parts, nil
}

func tarError(file string, err error) error {
	switch {
	case isGzipErr(err):
		return gzipError(file, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &FormatError{File: file, Offset: -1, Expected: "a complete tar archive", Found: "it cut short (truncated download?)"}
	}
	return fmt.Errorf("data: %s: not a valid tar archive inside the gzip (corrupt download?): %w", file, err)
}
