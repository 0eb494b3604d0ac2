package data

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"resnetlab/fsutil"
)

// CIFAR-10 binary format: records of 1 label byte + 3072 pixel bytes
// (R, G, B planes of 32x32); data_batch_1..5.bin and test_batch.bin hold
// 10000 records each.
const (
	CIFARRecordLen    = 1 + 3*Plane
	CIFARBatchRecords = 10000
	CIFARDir          = "cifar-10-batches-bin"
	CIFARTarball      = "cifar-10-binary.tar.gz"
	cifarTestFile     = "test_batch.bin"
	// A sanity bound on one batch file so a lying size (a tar header, say)
	// cannot make the reader allocate without limit.
	cifarMaxRecords = 10 * CIFARBatchRecords
)

// CIFARTrainFiles are the training batches in the order they are concatenated.
var CIFARTrainFiles = []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
	"data_batch_4.bin", "data_batch_5.bin"}

// cifarFiles are all the files a complete CIFAR-10 set has.
func cifarFiles() []string { return append(append([]string{}, CIFARTrainFiles...), cifarTestFile) }

// ReadCIFARBatch decodes one CIFAR-10 binary batch of size bytes from r;
// file names the source in errors. Any whole number of records is accepted
// (the real batches have 10000); a size that is not a multiple of 3073, a
// stream shorter than size, or a label outside [0,10) is an error.
func ReadCIFARBatch(r io.Reader, size int64, file string) (*Dataset, error) {
	if err := checkCIFARSize(size, file); err != nil {
		return nil, err
	}
	n := int(size / CIFARRecordLen)
	ds := &Dataset{Name: "cifar10", N: n, C: 3, Classes: CIFAR10Classes,
		Images: make([]uint8, n*3*Plane), Labels: make([]uint8, n)}
	br := bufio.NewReaderSize(r, 1<<16)
	for i := 0; i < n; i++ {
		off := int64(i) * CIFARRecordLen
		if _, err := io.ReadFull(br, ds.Labels[i:i+1]); err != nil {
			return nil, cifarReadError(file, off, size, err)
		}
		if ds.Labels[i] >= 10 {
			return nil, &FormatError{File: file, Offset: off, Expected: "a label in [0,10)",
				Found: fmt.Sprintf("label %d in record %d", ds.Labels[i], i)}
		}
		if _, err := io.ReadFull(br, ds.Image(i)); err != nil {
			return nil, cifarReadError(file, off+1, size, err)
		}
	}
	return ds, nil
}

func checkCIFARSize(size int64, file string) error {
	switch {
	case size <= 0:
		return &FormatError{File: file, Offset: -1, Expected: "records of 3073 bytes (1 label + 3072 pixels)",
			Found: fmt.Sprintf("%d bytes", size)}
	case size%CIFARRecordLen != 0:
		return &FormatError{File: file, Offset: -1,
			Expected: fmt.Sprintf("a multiple of %d bytes (1 label + 3072 pixels per record; a full batch is %d records = %d bytes)",
				CIFARRecordLen, CIFARBatchRecords, CIFARBatchRecords*CIFARRecordLen),
			Found: fmt.Sprintf("%d bytes = %d records + %d bytes (truncated or not a CIFAR-10 binary batch)",
				size, size/CIFARRecordLen, size%CIFARRecordLen)}
	case size > cifarMaxRecords*CIFARRecordLen:
		return &FormatError{File: file, Offset: -1,
			Expected: fmt.Sprintf("at most %d records", cifarMaxRecords),
			Found:    fmt.Sprintf("%d bytes", size)}
	}
	return nil
}

// cifarReadError explains a read that failed at byte off of a size-byte batch.
func cifarReadError(file string, off, size int64, err error) error {
	if isGzipErr(err) {
		return gzipError(file, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FormatError{File: file, Offset: off, Expected: fmt.Sprintf("%d bytes", size),
			Found: fmt.Sprintf("end of data inside record %d (file truncated)", off/CIFARRecordLen)}
	}
	return fmt.Errorf("data: %s: reading at byte %d: %w", file, off, err)
}

// LoadCIFAR10 loads CIFAR-10's binary version from, in this order,
// root/cifar-10-batches-bin/, root itself holding the .bin files,
// root/cifar-10-binary.tar.gz (read directly), or root being the tarball.
func LoadCIFAR10(root string) (train, test *Dataset, err error) {
	dirs := []string{filepath.Join(root, CIFARDir), root}
	for _, d := range dirs {
		if hasAny(d, cifarFiles()) {
			return withSource(d)(loadCIFARDir(d))
		}
	}
	tarballs := []string{filepath.Join(root, CIFARTarball), root}
	for _, t := range tarballs {
		if st, err := os.Stat(t); err == nil && st.Mode().IsRegular() {
			return withSource(t)(loadCIFARTar(t))
		}
	}
	return nil, nil, &NotFoundError{Dataset: "cifar10",
		Searched: []string{dirs[0] + "/*.bin", dirs[1] + "/*.bin", tarballs[0]},
		Hint: fmt.Sprintf("run `resnetlab data fetch cifar10` or put %s (or its extracted %s/) in %s",
			CIFARTarball, CIFARDir, root)}
}

// hasAny tells whether dir holds at least one of names as a regular file.
func hasAny(dir string, names []string) bool {
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(dir, n)); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

func loadCIFARDir(dir string) (train, test *Dataset, err error) {
	var parts []*Dataset
	for _, name := range cifarFiles() {
		ds, err := readCIFARFile(filepath.Join(dir, name))
		if err != nil {
			return nil, nil, err
		}
		parts = append(parts, ds)
	}
	return assembleCIFAR(parts, func(i int) string { return filepath.Join(dir, cifarFiles()[i]) })
}

func readCIFARFile(path string) (*Dataset, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("data: %s missing (CIFAR-10 needs data_batch_1..5.bin and test_batch.bin in %s)",
				path, filepath.Dir(path))
		}
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	return ReadCIFARBatch(f, st.Size(), path)
}

// assembleCIFAR joins the five train batches and checks they agree in
// length: a batch cut at a record boundary passes the size check alone.
func assembleCIFAR(parts []*Dataset, name func(int) string) (train, test *Dataset, err error) {
	trainParts := parts[:len(CIFARTrainFiles)]
	for i, p := range trainParts[1:] {
		if p.N != trainParts[0].N {
			return nil, nil, &FormatError{File: name(i + 1), Offset: -1,
				Expected: fmt.Sprintf("%d records like %s", trainParts[0].N, name(0)),
				Found:    fmt.Sprintf("%d records (truncated?)", p.N)}
		}
	}
	train = concat("cifar10", trainParts)
	test = parts[len(CIFARTrainFiles)]
	return train, test, nil
}

// concat joins data sets of the same kind into one.
func concat(name string, parts []*Dataset) *Dataset {
	out := &Dataset{Name: name, C: parts[0].C, Classes: parts[0].Classes}
	for _, p := range parts {
		out.N += p.N
	}
	out.Images = make([]uint8, 0, out.N*out.ImageLen())
	out.Labels = make([]uint8, 0, out.N)
	for _, p := range parts {
		out.Images = append(out.Images, p.Images...)
		out.Labels = append(out.Labels, p.Labels...)
	}
	return out
}

// withSource records src as where a loaded pair came from.
func withSource(src string) func(train, test *Dataset, err error) (*Dataset, *Dataset, error) {
	return func(train, test *Dataset, err error) (*Dataset, *Dataset, error) {
		if err == nil {
			train.Source, test.Source = src, src
		}
		return train, test, err
	}
}
