package data

import (
	"bytes"
	"slices"
	"testing"
)

func TestReadIdxRoundTrip(t *testing.T) {
	data := make([]byte, 3*5*7)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, gz := range []bool{false, true} {
		b := idxBytes([]int{3, 5, 7}, data)
		if gz {
			b = gzipBytes(t, b)
		}
		got, err := ReadIdx(bytes.NewReader(b), "a.idx")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Dims, []int{3, 5, 7}) || !bytes.Equal(got.Data, data) {
			t.Fatalf("gz=%v: dims %v, data equal %v", gz, got.Dims, bytes.Equal(got.Data, data))
		}
	}
}

func TestReadIdxErrors(t *testing.T) {
	good := idxBytes([]int{2, 3}, []byte{1, 2, 3, 4, 5, 6})
	gz := gzipBytes(t, good)
	badCRC := bytes.Clone(gz)
	badCRC[len(badCRC)-8] ^= 1
	cases := []struct {
		name   string
		in     []byte
		offset int64 // -2: not a FormatError
		parts  []string
	}{
		{"bad magic", append([]byte{0, 0, 9, 2}, good[4:]...), 0, []string{"idx magic", "00 00 09 02"}},
		{"not idx", []byte("hello world"), 0, []string{"idx magic", "68 65 6c 6c"}},
		{"short magic", []byte{0, 0}, 0, []string{"4-byte idx magic", "2 bytes"}},
		{"short dims", good[:9], 8, []string{"complete idx header"}},
		{"zero dim", idxBytes([]int{2, 0}, nil), 8, []string{"size 0 for dimension 1"}},
		{"truncated data", good[:len(good)-2], 16, []string{"6 data bytes for dims [2 3]", "4 (file truncated)"}},
		{"trailing bytes", append(bytes.Clone(good), 9), 18, []string{"end of file after 6 data bytes"}},
		{"huge dims", idxBytes([]int{1 << 20, 1 << 20}, nil), 4, []string{"at most"}},
		{"bad gzip crc", badCRC, -2, []string{"corrupt gzip", "checksum"}},
		{"bad gzip header", append([]byte{0x1f, 0x8b, 99}, make([]byte, 20)...), -2, []string{"corrupt gzip"}},
		{"truncated gzip", gz[:len(gz)-4], 18, []string{"truncated"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadIdx(bytes.NewReader(c.in), "f.idx")
			parts := append([]string{"f.idx"}, c.parts...)
			if c.offset == -2 {
				wantErr(t, err, parts...)
				return
			}
			wantFormatErr(t, err, c.offset, parts...)
		})
	}
}
