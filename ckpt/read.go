package ckpt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"resnetlab/fsutil"
	"unicode/utf8"

	"resnetlab/kernels"
)

// Classes of checkpoint read errors, for errors.Is. A missing file gives an
// error that matches fs.ErrNotExist.
var (
	ErrTruncated = errors.New("truncated")
	ErrMagic     = errors.New("not a resnetlab checkpoint (bad magic)")
	ErrVersion   = errors.New("unsupported format version")
	ErrKind      = errors.New("wrong kind")
	ErrChecksum  = errors.New("checksum mismatch (the file is corrupted)")
	ErrCorrupt   = errors.New("corrupted")
)

// maxCheckpointBytes bounds one checkpoint file (a width-4096 model's
// optimizer state is far below it); the read also never exceeds the size
// the file system reports.
const maxCheckpointBytes = 64 << 30

// ReadFile reads a checkpoint file written by WriteFile.
// wantKind "" accepts any kind. Errors name the file and say what is wrong.
func ReadFile(path, wantKind string) (meta map[string]any, ts []Tensor, err error) {
	b, err := fsutil.ReadFile(path, maxCheckpointBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("checkpoint %s: file not found: %w", path, fs.ErrNotExist)
		}
		var fe *fsutil.Error
		if errors.As(err, &fe) {
			return nil, nil, fmt.Errorf("checkpoint %w", err)
		}
		return nil, nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	meta, ts, err = Decode(b, wantKind)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return meta, ts, nil
}

// Decode decodes a checkpoint held in memory. It never panics and
// never allocates more than a small multiple of len(b), whatever b holds.
func Decode(b []byte, wantKind string) (map[string]any, []Tensor, error) {
	c := &cursor{b: b}
	if err := c.preamble(); err != nil {
		return nil, nil, err
	}
	declared, err := c.u64("the file length")
	if err != nil {
		return nil, nil, err
	}
	if err := checkLength(b, declared); err != nil {
		return nil, nil, err
	}
	body := len(b) - checksumLen
	if !bytes.Equal(hashOf(b[:body]), b[body:]) {
		return nil, nil, fmt.Errorf("%w: the SHA-256 of bytes 0..%d does not match the one stored at the end", ErrChecksum, body)
	}
	c.b = b[:body] // the checksum is good: what remains is body parsing
	meta, ts, err := c.body(wantKind)
	if err != nil {
		return nil, nil, err
	}
	if c.off != body {
		return nil, nil, fmt.Errorf("%w: %d unused bytes after the last tensor at byte %d", ErrCorrupt, body-c.off, c.off)
	}
	return meta, ts, nil
}

// preamble checks the magic number and the format version.
func (c *cursor) preamble() error {
	magic, err := c.bytes(8, "the magic number")
	if err != nil {
		return err
	}
	if string(magic) != checkpointMagic {
		return fmt.Errorf("%w: starts with %q, want %q", ErrMagic, magic, checkpointMagic)
	}
	version, err := c.u32("the format version")
	if err != nil {
		return err
	}
	if version < oldestVersion || version > checkpointVersion {
		return fmt.Errorf("%w %d (this build reads versions %d to %d)", ErrVersion, version, oldestVersion, checkpointVersion)
	}
	return nil
}

// checkLength compares the file size with the declared length; for a short
// file it walks the structure to say where the data stops.
func checkLength(b []byte, declared uint64) error {
	size := uint64(len(b))
	switch {
	case size > declared:
		return fmt.Errorf("%w: the file has %d bytes, %d more than its header declares", ErrCorrupt, size, size-declared)
	case size == declared:
		if size < 20+checksumLen { // a length field that points into the header
			return fmt.Errorf("%w: declared length %d is shorter than the header", ErrCorrupt, declared)
		}
		return nil
	}
	walk := &cursor{b: b, off: 20}
	_, _, err := walk.body("")
	switch {
	case err == nil: // the structure fits: the bytes lost are in the trailer
		return fmt.Errorf("%w: file ends at byte %d while reading the SHA-256 trailer; the header declares %d bytes",
			ErrTruncated, size, declared)
	case errors.Is(err, ErrTruncated):
		return fmt.Errorf("%w; the header declares %d bytes", err, declared)
	}
	return fmt.Errorf("%w: the file has %d bytes, fewer than the %d its header declares, and %v",
		ErrTruncated, size, declared, err)
}

// cursor reads little-endian fields with bounds checks.
type cursor struct {
	b   []byte
	off int
}

func (c *cursor) left() int { return len(c.b) - c.off }

func (c *cursor) bytes(n int, what string) ([]byte, error) {
	if n < 0 || n > c.left() {
		return nil, c.short(int64(n), what)
	}
	s := c.b[c.off : c.off+n]
	c.off += n
	return s, nil
}

// short is the error for n bytes of what that the file does not have.
func (c *cursor) short(n int64, what string) error {
	return fmt.Errorf("%w: file ends at byte %d while reading %s (%d bytes needed from byte %d, %d left)",
		ErrTruncated, len(c.b), what, n, c.off, c.left())
}

func (c *cursor) u8(what string) (byte, error) {
	s, err := c.bytes(1, what)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

func (c *cursor) u32(what string) (uint32, error) {
	s, err := c.bytes(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(s), nil
}

func (c *cursor) u64(what string) (uint64, error) {
	s, err := c.bytes(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(s), nil
}

// str reads a u32-length-prefixed string of at most limit bytes.
func (c *cursor) str(what string, limit int) (string, error) {
	at := c.off
	n, err := c.u32("the length of " + what)
	if err != nil {
		return "", err
	}
	if n > uint32(limit) {
		return "", fmt.Errorf("%w: %s at byte %d claims %d bytes (at most %d)", ErrCorrupt, what, at, n, limit)
	}
	s, err := c.bytes(int(n), what)
	return string(s), err
}

// body parses kind, metadata, tensor table and data, from offset 20.
func (c *cursor) body(wantKind string) (map[string]any, []Tensor, error) {
	kind, err := c.str("the kind", maxKindLen)
	if err != nil {
		return nil, nil, err
	}
	if wantKind != "" && kind != wantKind {
		return nil, nil, fmt.Errorf("%w: the file holds %q, want %q", ErrKind, kind, wantKind)
	}
	meta, err := c.meta()
	if err != nil {
		return nil, nil, err
	}
	ts, err := c.table()
	if err != nil {
		return nil, nil, err
	}
	for i := range ts {
		if err := c.data(&ts[i]); err != nil {
			return nil, nil, err
		}
	}
	return meta, ts, nil
}

func (c *cursor) meta() (map[string]any, error) {
	at := c.off
	js, err := c.str("the metadata", maxMetaLen)
	if err != nil {
		return nil, err
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(js), &meta); err != nil || meta == nil {
		return nil, fmt.Errorf("%w: the metadata at byte %d is not a JSON object", ErrCorrupt, at)
	}
	return meta, nil
}

// tensorHeaderMin is the smallest tensor table entry: name length, a
// 1-byte name, dtype and ndim.
const tensorHeaderMin = 4 + 1 + 1 + 1

func (c *cursor) table() ([]Tensor, error) {
	n, err := c.u32("the tensor count")
	if err != nil {
		return nil, err
	}
	// Grow as headers are read (each takes at least tensorHeaderMin bytes),
	// so a corrupted count cannot make us allocate more than the file holds.
	ts := make([]Tensor, 0, min(int(n), c.left()/tensorHeaderMin))
	seen := map[string]bool{}
	for i := 0; i < int(n); i++ {
		var t Tensor
		if err := c.tensorHeader(&t, i, seen); err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func (c *cursor) tensorHeader(t *Tensor, i int, seen map[string]bool) error {
	what := fmt.Sprintf("tensor %d", i)
	name, err := c.str("the name of "+what, maxNameLen)
	if err != nil {
		return err
	}
	if name == "" || !utf8.ValidString(name) || seen[name] {
		return fmt.Errorf("%w: %s has an empty, invalid or repeated name %q", ErrCorrupt, what, name)
	}
	seen[name] = true
	what = fmt.Sprintf("tensor %q", name)
	code, err := c.u8("the dtype of " + what)
	if err != nil {
		return err
	}
	if int(code) >= len(dtypeCodes) {
		return fmt.Errorf("%w: %s has unknown dtype code %d at byte %d", ErrCorrupt, what, code, c.off-1)
	}
	ndim, err := c.u8("the rank of " + what)
	if err != nil {
		return err
	}
	if ndim > maxNDim {
		return fmt.Errorf("%w: %s claims %d dims (at most %d)", ErrCorrupt, what, ndim, maxNDim)
	}
	*t = Tensor{Name: name, DType: dtypeCodes[code], Shape: make([]int, ndim)}
	for d := range t.Shape {
		v, err := c.u64("the shape of " + what)
		if err != nil {
			return err
		}
		if v > math.MaxInt32 {
			return fmt.Errorf("%w: %s has dimension %d", ErrCorrupt, what, v)
		}
		t.Shape[d] = int(v)
	}
	return nil
}

// data reads a tensor's values; its size is checked against the bytes left
// before anything is allocated.
func (c *cursor) data(t *Tensor) error {
	code := byte(0)
	for i, d := range dtypeCodes {
		if d == t.DType {
			code = byte(i)
		}
	}
	size := dtypeSize(code)
	numel, ok := boundedNumel(t.Shape, math.MaxInt64/8)
	what := fmt.Sprintf("the data of tensor %q (shape %v, %s)", t.Name, t.Shape, t.DType)
	if !ok {
		return fmt.Errorf("%w: file ends at byte %d while reading %s (more than 2^60 bytes needed from byte %d, %d left)",
			ErrTruncated, len(c.b), what, c.off, c.left())
	}
	if numel*size > int64(c.left()) { // checked before int conversion and allocation
		return c.short(numel*size, what)
	}
	raw, err := c.bytes(int(numel*size), what)
	if err != nil {
		return err
	}
	decodeValues(t, raw, int(numel))
	return nil
}

// boundedNumel is the element count of shape, and false when it exceeds
// limit (computed without overflow).
func boundedNumel(shape []int, limit int64) (int64, bool) {
	for _, d := range shape {
		if d == 0 {
			return 0, true
		}
	}
	n := int64(1)
	for _, d := range shape {
		if n > limit/int64(d) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

func decodeValues(t *Tensor, raw []byte, n int) {
	le := binary.LittleEndian
	if t.DType == DTypeI64 {
		t.I64 = make([]int64, n)
		for i := range t.I64 {
			t.I64[i] = int64(le.Uint64(raw[8*i:]))
		}
		return
	}
	t.F32 = make([]float32, n)
	for i := range t.F32 {
		switch t.DType {
		case DTypeF32:
			t.F32[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		case DTypeF16:
			t.F32[i] = kernels.F16BitsToF32(le.Uint16(raw[2*i:]))
		case DTypeBF16:
			t.F32[i] = kernels.BF16BitsToF32(le.Uint16(raw[2*i:]))
		}
	}
}
