package data

import (
	"bytes"
	"testing"
)

// FuzzCIFARRecordReader: any bytes, claimed complete or claimed longer
// than they are, give a data set or an error, never a panic; a data set
// returned is consistent.
func FuzzCIFARRecordReader(f *testing.F) {
	raw, _, _ := cifarRecords(2, 1)
	f.Add(raw)
	f.Add(raw[:100])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, size := range []int64{int64(len(b)), int64(len(b)/CIFARRecordLen+1) * CIFARRecordLen, 0, -1} {
			ds, err := ReadCIFARBatch(bytes.NewReader(b), size, "fuzz.bin")
			if err != nil {
				continue
			}
			if verr := ds.Validate(); verr != nil || int64(ds.N)*CIFARRecordLen != size {
				t.Fatalf("size %d: inconsistent data set: %v, N=%d", size, verr, ds.N)
			}
		}
		readCIFARTar(bytes.NewReader(b), "fuzz.tar.gz") // must not panic
	})
}

// FuzzIdxReader: any bytes give an idx or an error, never a panic; an idx
// returned has exactly prod(dims) bytes.
func FuzzIdxReader(f *testing.F) {
	f.Add(idxBytes([]int{2, 3}, []byte{1, 2, 3, 4, 5, 6}))
	f.Add([]byte{0, 0, 8, 1, 0, 0, 0, 2, 7})
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := ReadIdx(bytes.NewReader(b), "fuzz.idx")
		if err != nil {
			return
		}
		n := 1
		for _, d := range idx.Dims {
			n *= d
		}
		if len(idx.Data) != n || len(idx.Dims) < 1 || len(idx.Dims) > 4 {
			t.Fatalf("dims %v with %d data bytes", idx.Dims, len(idx.Data))
		}
	})
}
