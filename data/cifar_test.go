package data

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadCIFAR10Layouts(t *testing.T) {
	set := makeCIFARSet(3)
	tgz := tarGz(t, CIFARDir, []string{"readme.html", "test_batch.bin", "data_batch_4.bin", "data_batch_1.bin",
		"batches.meta.txt", "data_batch_2.bin", "data_batch_5.bin", "data_batch_3.bin"},
		mergeFiles(set.files, map[string][]byte{"readme.html": []byte("<html>"), "batches.meta.txt": []byte("airplane\n")}))
	layouts := map[string]func(root string) string{ // builds a layout, returns the root to load
		"extracted folder": func(root string) string { writeFiles(t, filepath.Join(root, CIFARDir), set.files); return root },
		"root holds bins":  func(root string) string { writeFiles(t, root, set.files); return root },
		"tarball in root": func(root string) string {
			writeFiles(t, root, map[string][]byte{CIFARTarball: tgz})
			return root
		},
		"root is tarball": func(root string) string {
			writeFiles(t, root, map[string][]byte{"x.tar.gz": tgz})
			return filepath.Join(root, "x.tar.gz")
		},
	}
	for name, build := range layouts {
		t.Run(name, func(t *testing.T) {
			train, test, err := LoadCIFAR10(build(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			sameData(t, "train", train, set.train)
			sameData(t, "test", test, set.test)
			if train.N != 15 || len(train.Classes) != 10 || train.Classes[9] != "truck" {
				t.Fatalf("train N=%d classes %v", train.N, train.Classes)
			}
		})
	}
}

func mergeFiles(a, b map[string][]byte) map[string][]byte {
	m := map[string][]byte{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

func TestReadCIFARBatchErrors(t *testing.T) {
	raw, _, _ := cifarRecords(2, 7)
	t.Run("size not a multiple", func(t *testing.T) {
		b := append(bytes.Clone(raw), 1, 2, 3, 4, 5)
		_, err := ReadCIFARBatch(bytes.NewReader(b), int64(len(b)), "x.bin")
		wantFormatErr(t, err, -1, "x.bin", "multiple of 3073", "6151 bytes = 2 records + 5 bytes")
	})
	t.Run("empty", func(t *testing.T) {
		_, err := ReadCIFARBatch(bytes.NewReader(nil), 0, "e.bin")
		wantFormatErr(t, err, -1, "e.bin", "0 bytes")
	})
	t.Run("stream shorter than size", func(t *testing.T) {
		_, err := ReadCIFARBatch(bytes.NewReader(raw[:4000]), int64(len(raw)), "t.bin")
		wantFormatErr(t, err, 3074, "t.bin", "truncated", "record 1")
	})
	t.Run("label out of range", func(t *testing.T) {
		b := bytes.Clone(raw)
		b[CIFARRecordLen] = 10
		_, err := ReadCIFARBatch(bytes.NewReader(b), int64(len(b)), "l.bin")
		wantFormatErr(t, err, CIFARRecordLen, "l.bin", "label 10 in record 1", "[0,10)")
	})
	t.Run("absurd size", func(t *testing.T) {
		_, err := ReadCIFARBatch(bytes.NewReader(raw), CIFARRecordLen*(cifarMaxRecords+1), "big.bin")
		wantFormatErr(t, err, -1, "big.bin", "at most")
	})
}

func TestLoadCIFAR10Errors(t *testing.T) {
	set := makeCIFARSet(2)
	t.Run("nothing there", func(t *testing.T) {
		root := t.TempDir()
		_, _, err := LoadCIFAR10(root)
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			t.Fatalf("error %v is %T, want *NotFoundError", err, err)
		}
		wantErr(t, err, filepath.Join(root, CIFARDir), filepath.Join(root, CIFARTarball), "fetch cifar10")
	})
	t.Run("missing batch", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), CIFARDir)
		writeFiles(t, dir, set.files)
		os.Remove(filepath.Join(dir, "data_batch_3.bin"))
		_, _, err := LoadCIFAR10(filepath.Dir(dir))
		wantErr(t, err, filepath.Join(dir, "data_batch_3.bin"), "missing")
	})
	t.Run("batch cut at a record boundary", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, set.files)
		writeFiles(t, dir, map[string][]byte{"data_batch_4.bin": set.files["data_batch_4.bin"][:CIFARRecordLen]})
		_, _, err := LoadCIFAR10(dir)
		wantFormatErr(t, err, -1, "data_batch_4.bin", "1 records", "2 records like")
	})
	t.Run("truncated file", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, set.files)
		writeFiles(t, dir, map[string][]byte{"test_batch.bin": set.files["test_batch.bin"][:5000]})
		_, _, err := LoadCIFAR10(dir)
		wantFormatErr(t, err, -1, filepath.Join(dir, "test_batch.bin"), "multiple of 3073", "5000 bytes")
	})
}

func TestLoadCIFAR10TarballErrors(t *testing.T) {
	set := makeCIFARSet(2)
	names := cifarFiles()
	good := tarGz(t, CIFARDir, names, set.files)
	load := func(t *testing.T, b []byte) error {
		root := t.TempDir()
		writeFiles(t, root, map[string][]byte{CIFARTarball: b})
		_, _, err := LoadCIFAR10(root)
		return err
	}
	t.Run("missing entry", func(t *testing.T) {
		err := load(t, tarGz(t, CIFARDir, names[1:], set.files))
		wantFormatErr(t, err, -1, CIFARTarball, "no data_batch_1.bin")
	})
	t.Run("corrupt gzip checksum", func(t *testing.T) {
		b := bytes.Clone(good)
		b[len(b)-8] ^= 0xff // the CRC-32 in the gzip trailer
		wantErr(t, load(t, b), CIFARTarball, "corrupt gzip", "checksum")
	})
	t.Run("corrupt bytes inside", func(t *testing.T) {
		b := bytes.Clone(good)
		for i := len(b) / 3; i < len(b)/3+64; i++ {
			b[i] ^= 0x5a
		}
		wantErr(t, load(t, b), CIFARTarball, "corrupt")
	})
	t.Run("not gzip", func(t *testing.T) {
		wantErr(t, load(t, []byte("this is not a gzip file at all")), CIFARTarball, "corrupt gzip")
	})
	t.Run("truncated", func(t *testing.T) {
		err := load(t, good[:len(good)/2])
		wantErr(t, err, CIFARTarball, "truncated")
	})
	t.Run("bad entry size", func(t *testing.T) {
		files := mergeFiles(set.files, map[string][]byte{"data_batch_2.bin": set.files["data_batch_2.bin"][:3000]})
		err := load(t, tarGz(t, CIFARDir, names, files))
		wantFormatErr(t, err, -1, CIFARTarball+":"+CIFARDir+"/data_batch_2.bin", "3000 bytes")
	})
}
