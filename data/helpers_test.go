package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cifarRecords builds n CIFAR-10 records from a seeded stream and returns
// the raw bytes plus the images and labels they must decode to, built
// independently of the reader (pixel j of record i is byte 1+j of it).
func cifarRecords(n int, key uint64) (raw, images, labels []byte) {
	r := rng{key}
	for i := 0; i < n; i++ {
		lbl := byte(r.intn(10))
		labels = append(labels, lbl)
		raw = append(raw, lbl)
		for j := 0; j < 3072; j++ {
			b := byte(r.next())
			raw = append(raw, b)
			images = append(images, b)
		}
	}
	return raw, images, labels
}

// cifarSet is a fake CIFAR-10: the bytes of each file and the expected data sets.
type cifarSet struct {
	files       map[string][]byte
	train, test *Dataset
}

func makeCIFARSet(perFile int) cifarSet {
	s := cifarSet{files: map[string][]byte{}}
	s.train = &Dataset{C: 3}
	for i, name := range cifarFiles() {
		raw, img, lbl := cifarRecords(perFile, uint64(100+i))
		s.files[name] = raw
		if name == cifarTestFile {
			s.test = &Dataset{C: 3, N: perFile, Images: img, Labels: lbl}
		} else {
			s.train.N += perFile
			s.train.Images = append(s.train.Images, img...)
			s.train.Labels = append(s.train.Labels, lbl...)
		}
	}
	return s
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tarGz packs files (in the order of names) under prefix/ into a .tar.gz.
func tarGz(t *testing.T, prefix string, names []string, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range names {
		b := files[name]
		hdr := &tar.Header{Name: prefix + "/" + name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// idxBytes encodes an idx file of unsigned bytes.
func idxBytes(dims []int, data []byte) []byte {
	b := []byte{0, 0, 8, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return append(b, data...)
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sameData fails unless got holds exactly want's images and labels.
func sameData(t *testing.T, what string, got, want *Dataset) {
	t.Helper()
	if got.N != want.N || got.C != want.C {
		t.Fatalf("%s: N=%d C=%d, want N=%d C=%d", what, got.N, got.C, want.N, want.C)
	}
	if !bytes.Equal(got.Images, want.Images) || !bytes.Equal(got.Labels, want.Labels) {
		t.Fatalf("%s: images or labels differ from the records written", what)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErr fails unless err is non-nil and its message holds every part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

// wantFormatErr fails unless err is a *FormatError at the given offset
// whose message holds every part.
func wantFormatErr(t *testing.T, err error, offset int64, parts ...string) {
	t.Helper()
	wantErr(t, err, parts...)
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error %q is %T, want *FormatError", err, err)
	}
	if fe.Offset != offset {
		t.Fatalf("error %q at offset %d, want %d", err, fe.Offset, offset)
	}
}
