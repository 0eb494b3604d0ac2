package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Idx is a decoded idx file (the MNIST format) of unsigned bytes.
type Idx struct {
	Dims []int
	Data []uint8
}

// MaxIdxBytes bounds the data an idx header may announce, so a damaged
// header cannot make the reader allocate without limit.
const MaxIdxBytes = 1 << 30

// ReadIdx decodes an idx file of unsigned bytes (magic 00 00 08 ndims, then
// ndims big-endian uint32 sizes, then the data), gzipped or not: a gzip
// stream is recognised by its magic. file names the source in errors.
func ReadIdx(r io.Reader, file string) (*Idx, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, gzipError(file, err)
		}
		return readIdx(bufio.NewReaderSize(gz, 1<<16), file)
	}
	return readIdx(br, file)
}

func readIdx(r io.Reader, file string) (*Idx, error) {
	dims, err := readIdxHeader(r, file)
	if err != nil {
		return nil, err
	}
	total := 1
	for _, d := range dims {
		total *= d // no overflow: each d >= 1 and the product is checked as it grows
		if total > MaxIdxBytes {
			return nil, &FormatError{File: file, Offset: 4, Expected: fmt.Sprintf("at most %d data bytes", MaxIdxBytes),
				Found: fmt.Sprintf("dims %v", dims)}
		}
	}
	hdr := int64(4 + 4*len(dims))
	data, err := readAtMost(r, total)
	if err != nil {
		return nil, idxReadError(file, hdr+int64(len(data)), "the data", err)
	}
	if len(data) < total {
		return nil, &FormatError{File: file, Offset: hdr + int64(len(data)),
			Expected: fmt.Sprintf("%d data bytes for dims %v", total, dims),
			Found:    fmt.Sprintf("%d (file truncated)", len(data))}
	}
	// Reading one more byte both finds trailing garbage and, for gzip, makes
	// the reader check the stream's CRC.
	var extra [1]byte
	if n, err := io.ReadFull(r, extra[:]); n > 0 {
		return nil, &FormatError{File: file, Offset: hdr + int64(total),
			Expected: fmt.Sprintf("end of file after %d data bytes for dims %v", total, dims),
			Found:    "more bytes (wrong dims or not an idx file)"}
	} else if !errors.Is(err, io.EOF) {
		return nil, idxReadError(file, hdr+int64(total), "the end of the stream", err)
	}
	return &Idx{Dims: dims, Data: data}, nil
}

func readIdxHeader(r io.Reader, file string) ([]int, error) {
	var magic [4]byte
	if n, err := io.ReadFull(r, magic[:]); err != nil {
		if isGzipErr(err) {
			return nil, gzipError(file, err)
		}
		return nil, &FormatError{File: file, Offset: 0, Expected: "a 4-byte idx magic",
			Found: fmt.Sprintf("%d bytes", n)}
	}
	if magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] < 1 || magic[3] > 4 {
		return nil, &FormatError{File: file, Offset: 0,
			Expected: "idx magic 00 00 08 0N (unsigned bytes, N = 1..4 dims)",
			Found:    fmt.Sprintf("% x", magic[:])}
	}
	dims := make([]int, magic[3])
	var b [4]byte
	for i := range dims {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, idxReadError(file, int64(4+4*i), "a complete idx header", err)
		}
		dims[i] = int(binary.BigEndian.Uint32(b[:]))
		if dims[i] == 0 {
			return nil, &FormatError{File: file, Offset: int64(4 + 4*i), Expected: "non-zero dimension sizes",
				Found: fmt.Sprintf("size 0 for dimension %d", i)}
		}
	}
	return dims, nil
}

// readAtMost reads up to n bytes, growing the buffer as data arrives rather
// than trusting n up front. A short stream is not an error here.
func readAtMost(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, 1<<16))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n-len(buf), cap(buf))) // doubling, capped at n
		}
		k, err := r.Read(buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+k]
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// idxReadError explains a failed read at byte off while reading expected.
func idxReadError(file string, off int64, expected string, err error) error {
	switch {
	case isGzipErr(err):
		return gzipError(file, err)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &FormatError{File: file, Offset: off, Expected: expected, Found: "end of file (truncated)"}
	}
	return fmt.Errorf("data: %s: reading at byte %d: %w", file, off, err)
}
