package torchfmt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// maxHeaderLen caps the safetensors JSON header, as the reference implementation
// does (100 MB), so a corrupt length cannot make us allocate the whole file.
const maxHeaderLen = 100 << 20

const metadataKey = "__metadata__"

// WriteSafetensors writes ts in the published safetensors layout: an 8-byte
// little-endian header length, a JSON header padded with spaces to a multiple of 8,
// then the tensors' little-endian bytes packed in the given order.
func WriteSafetensors(w io.Writer, ts []Tensor, metadata map[string]string) error {
	if err := validateAll(ts); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for _, t := range ts {
		if t.Name == metadataKey {
			return fmt.Errorf("safetensors: tensor name %q is reserved for metadata", metadataKey)
		}
	}
	header := safetensorsHeader(ts, metadata)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	var buf []byte
	for _, t := range ts {
		buf = appendLE(buf[:0], t)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// safetensorsHeader builds the JSON header by hand so that keys keep the tensors'
// order (encoding/json would sort a map) and metadata comes first.
func safetensorsHeader(ts []Tensor, metadata map[string]string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		m, _ := json.Marshal(metadata) // map[string]string always marshals
		b.WriteString(`"` + metadataKey + `":`)
		b.Write(m)
	}
	var off int64
	for i, t := range ts {
		if i > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(t.Name)
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		sh, _ := json.Marshal(shape)
		n := int64(t.Numel() * dtypeSize(t.DType))
		fmt.Fprintf(&b, `%s:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}`, name, t.DType, sh, off, off+n)
		off += n
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes()
}

// stEntry is one tensor's header record; pointers tell a missing field from a zero.
type stEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int   `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// stTensor is a validated header record.
type stTensor struct {
	name       string
	dtype      string
	shape      []int
	n          int
	begin, end int64
}

// ReadSafetensors reads a safetensors file of the given size. It validates the
// header completely (lengths, dtypes, shapes, offsets in range, no overlaps or gaps)
// before reading any data. Tensors come back in header order.
func ReadSafetensors(r io.ReaderAt, size int64) ([]Tensor, map[string]string, error) {
	header, err := readSTHeader(r, size)
	if err != nil {
		return nil, nil, err
	}
	entries, meta, err := parseSTHeader(header)
	if err != nil {
		return nil, nil, err
	}
	dataStart := 8 + int64(len(header))
	if err := checkSTOffsets(entries, dataStart, size); err != nil {
		return nil, nil, err
	}
	ts := make([]Tensor, 0, len(entries))
	for _, e := range entries {
		raw := make([]byte, e.end-e.begin)
		if _, err := r.ReadAt(raw, dataStart+e.begin); err != nil {
			return nil, nil, fmt.Errorf("safetensors: reading tensor %q: %w", e.name, err)
		}
		ts = append(ts, decodeContiguous(e.name, e.dtype, e.shape, e.n, raw))
	}
	return ts, meta, nil
}

// readSTHeader reads and bounds-checks the length prefix and returns the header bytes.
func readSTHeader(r io.ReaderAt, size int64) ([]byte, error) {
	if size < 8 {
		return nil, fmt.Errorf("safetensors: file is %d bytes, too short for the 8-byte header length", size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: reading header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxHeaderLen { // a corrupt length, not a cut file: say no more
		return nil, fmt.Errorf("safetensors: header length %d exceeds the %d-byte limit", n, maxHeaderLen)
	}
	if n > uint64(size-8) {
		return nil, fmt.Errorf("safetensors: truncated: the header length says the header runs to byte %d, the file has %d bytes", 8+n, size)
	}
	if n < 2 {
		return nil, fmt.Errorf("safetensors: header length %d is too short for a JSON object", n)
	}
	header := make([]byte, n)
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("safetensors: reading %d-byte header: %w", n, err)
	}
	if header[0] != '{' {
		return nil, fmt.Errorf("safetensors: header does not start with '{' (got %q)", header[0])
	}
	return header, nil
}

// parseSTHeader decodes the JSON header token by token to keep key order and to
// catch duplicate keys, which a map decode would silently merge.
func parseSTHeader(header []byte) ([]stTensor, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("safetensors: bad header JSON: %w", err)
	}
	var entries []stTensor
	var meta map[string]string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: bad header JSON: %w", err)
		}
		key, _ := tok.(string) // object keys are always strings
		if seen[key] {
			return nil, nil, fmt.Errorf("safetensors: header key %q appears twice", key)
		}
		seen[key] = true
		if key == metadataKey {
			if err := dec.Decode(&meta); err != nil {
				return nil, nil, fmt.Errorf("safetensors: %s must map strings to strings: %w", metadataKey, err)
			}
			continue
		}
		var raw stEntry
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: bad header entry: %w", key, err)
		}
		e, err := checkSTEntry(key, raw)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("safetensors: bad header JSON: %w", err)
	}
	if rest := bytes.TrimLeft(header[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, nil, fmt.Errorf("safetensors: %d unexpected bytes after the header JSON object", len(rest))
	}
	return entries, meta, nil
}

// checkSTEntry validates one header record against its dtype and shape.
func checkSTEntry(name string, raw stEntry) (stTensor, error) {
	if raw.DType == nil || raw.Shape == nil || raw.DataOffsets == nil {
		return stTensor{}, fmt.Errorf("safetensors: tensor %q: header entry needs dtype, shape and data_offsets", name)
	}
	e := stTensor{name: name, dtype: *raw.DType, shape: *raw.Shape}
	size := dtypeSize(e.dtype)
	if size == 0 {
		return e, fmt.Errorf("safetensors: tensor %q: dtype %q not supported (want F32, F16, BF16 or I64)", name, e.dtype)
	}
	n, err := numel(e.shape)
	if err != nil {
		return e, fmt.Errorf("safetensors: tensor %q: %v", name, err)
	}
	e.n = n
	if e.shape == nil {
		e.shape = []int{}
	}
	offs := *raw.DataOffsets
	if len(offs) != 2 {
		return e, fmt.Errorf("safetensors: tensor %q: data_offsets has %d values, want 2", name, len(offs))
	}
	e.begin, e.end = offs[0], offs[1]
	if e.begin < 0 || e.end < e.begin {
		return e, fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] are not an increasing pair of non-negative offsets", name, e.begin, e.end)
	}
	if want := int64(n) * int64(size); e.end-e.begin != want {
		return e, fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] span %d bytes, but %s shape %v needs %d",
			name, e.begin, e.end, e.end-e.begin, e.dtype, e.shape, want)
	}
	return e, nil
}

// checkSTOffsets requires the tensors to tile the data buffer (the file
// from dataStart to size) exactly: no overlap, no gap, nothing left over
// (as the reference reader does). Gaps and overlaps are checked first, so
// tiles that reach past the end mean a file cut short.
func checkSTOffsets(entries []stTensor, dataStart, size int64) error {
	sorted := make([]stTensor, len(entries))
	copy(sorted, entries)
	// Empty tensors sort before a tensor starting at the same offset.
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].begin != sorted[j].begin {
			return sorted[i].begin < sorted[j].begin
		}
		return sorted[i].end < sorted[j].end
	})
	var pos int64
	prev, cut := "", ""
	for _, e := range sorted {
		if e.begin < pos {
			return fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] overlap tensor %q, which ends at %d", e.name, e.begin, e.end, prev, pos)
		}
		if e.begin > pos {
			return fmt.Errorf("safetensors: tensor %q: data_offsets start at %d, leaving a gap after byte %d", e.name, e.begin, pos)
		}
		if cut == "" && dataStart+e.end > size {
			cut = e.name
		}
		pos, prev = e.end, e.name
	}
	switch bufLen := size - dataStart; {
	case pos > bufLen:
		return fmt.Errorf("safetensors: truncated: the header says the file is %d bytes, it has %d (cut in tensor %q)", dataStart+pos, size, cut)
	case pos < bufLen:
		return fmt.Errorf("safetensors: tensors cover %d bytes but the data buffer holds %d", pos, bufLen)
	}
	return nil
}
