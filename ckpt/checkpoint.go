package ckpt

// # Checkpoint files
//
// A checkpoint is three files per saved epoch E in the run's checkpoint
// directory, named as in ColossalAI's example: model_E.pth,
// optimizer_E.pth and lr_scheduler_E.pth. Despite the .pth names they are
// not PyTorch pickles but resnetlab's own container, the same for all three
// (only the "kind" differs). All integers are little-endian.
//
//	offset  size       field
//	0       8          magic "RNLBCKPT"
//	8       4          u32 format version (2; version 1 files, which
//	                   lack the metadata "save_id", are still read)
//	12      8          u64 total file length in bytes, trailer included
//	20      4 + K      u32 K, then the kind: "model", "optimizer" or "lr_scheduler"
//	        4 + M      u32 M, then M bytes of JSON: an object of small values
//	                   (epoch, plugin, precision, world_size, width, ...)
//	        4          u32 N, the number of tensors
//	        N entries  per tensor: u32 L, L bytes of name (UTF-8); u8 dtype
//	                   (0 f32, 1 f16, 2 bf16, 3 i64); u8 ndim (0..8);
//	                   ndim x u64 dims (a 0-dim tensor holds one value)
//	        ...        the tensors' data in table order, each row-major:
//	                   4 bytes per f32, 2 per f16/bf16 (IEEE binary16 /
//	                   bfloat16 bits), 8 per i64
//	end-32  32         SHA-256 of every byte before it
//
// Files are written atomically: to a temporary file in the same directory,
// synced, then renamed over the target, so a crash never leaves a torn
// checkpoint. Readers check the length, the checksum and every field, and
// name the byte offset and the field when a file is truncated.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"unicode/utf8"

	"resnetlab/fsutil"
	"resnetlab/kernels"
)

const (
	checkpointMagic   = "RNLBCKPT"
	checkpointVersion = 2
	// oldestVersion is the oldest format this build reads: version 1 is
	// version 2 without "save_id" in the metadata.
	oldestVersion = 1
	maxKindLen    = 64
	maxNameLen    = 4096
	maxNDim       = 8
	maxMetaLen    = 16 << 20
	checksumLen   = sha256.Size
)

// Tensor dtypes in checkpoint files.
const (
	DTypeF32  = "f32"
	DTypeF16  = "f16"
	DTypeBF16 = "bf16"
	DTypeI64  = "i64"
)

var dtypeCodes = []string{DTypeF32, DTypeF16, DTypeBF16, DTypeI64}

func dtypeSize(code byte) int64 { return [...]int64{4, 2, 2, 8}[code] }

// Tensor is one named tensor of a checkpoint. Float tensors (f32, f16,
// bf16) hold their values in F32 (f16/bf16 are rounded to the narrow type
// when written); i64 tensors use I64.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	F32   []float32
	I64   []int64
}

// Numel is the number of elements the shape describes (1 for a scalar).
func (t *Tensor) Numel() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Paths returns the reference file names of epoch's checkpoint.
func Paths(dir string, epoch int) (model, optim, sched string) {
	f := func(kind string) string { return filepath.Join(dir, fmt.Sprintf("%s_%d.pth", kind, epoch)) }
	return f("model"), f("optimizer"), f("lr_scheduler")
}

// WriteFile writes one checkpoint file atomically, creating its
// directory if needed.
func WriteFile(path, kind string, meta map[string]any, ts []Tensor) error {
	header, dataLen, err := encodeHeader(kind, meta, ts)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	total := int64(len(header)) + dataLen + checksumLen
	binary.LittleEndian.PutUint64(header[12:], uint64(total))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return fsutil.WriteFileAtomic(path, func(w io.Writer) error {
		h := sha256.New()
		hw := io.MultiWriter(w, h)
		if _, err := hw.Write(header); err != nil {
			return err
		}
		for i := range ts {
			if err := writeTensorData(hw, &ts[i]); err != nil {
				return err
			}
		}
		_, err := w.Write(h.Sum(nil))
		return err
	})
}

// encodeHeader validates the tensors and lays out everything before the
// data; the total-length field is left for the caller. dataLen is the
// number of data bytes that follow.
func encodeHeader(kind string, meta map[string]any, ts []Tensor) ([]byte, int64, error) {
	if kind == "" || len(kind) > maxKindLen {
		return nil, 0, fmt.Errorf("kind %q must be 1 to %d bytes", kind, maxKindLen)
	}
	if meta == nil {
		meta = map[string]any{}
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return nil, 0, fmt.Errorf("metadata cannot be stored as JSON: %w", err)
	}
	if len(js) > maxMetaLen {
		return nil, 0, fmt.Errorf("metadata is %d bytes of JSON (at most %d)", len(js), maxMetaLen)
	}
	var b bytes.Buffer
	b.WriteString(checkpointMagic)
	le := binary.LittleEndian
	b.Write(le.AppendUint32(nil, checkpointVersion))
	b.Write(make([]byte, 8)) // total length, filled in later
	writeString(&b, kind)
	writeString(&b, string(js))
	b.Write(le.AppendUint32(nil, uint32(len(ts))))
	var dataLen int64
	seen := map[string]bool{}
	for i := range ts {
		t := &ts[i]
		code, err := checkTensor(t, seen)
		if err != nil {
			return nil, 0, err
		}
		writeString(&b, t.Name)
		b.WriteByte(code)
		b.WriteByte(byte(len(t.Shape)))
		for _, d := range t.Shape {
			b.Write(le.AppendUint64(nil, uint64(d)))
		}
		dataLen += int64(t.Numel()) * dtypeSize(code)
	}
	return b.Bytes(), dataLen, nil
}

func writeString(b *bytes.Buffer, s string) {
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s))))
	b.WriteString(s)
}

// checkTensor validates one entry and returns its dtype code.
func checkTensor(t *Tensor, seen map[string]bool) (byte, error) {
	if t.Name == "" || len(t.Name) > maxNameLen || !utf8.ValidString(t.Name) {
		return 0, fmt.Errorf("tensor name %q must be 1 to %d bytes of UTF-8", t.Name, maxNameLen)
	}
	if seen[t.Name] {
		return 0, fmt.Errorf("tensor %q appears twice", t.Name)
	}
	seen[t.Name] = true
	code := -1
	for i, d := range dtypeCodes {
		if d == t.DType {
			code = i
		}
	}
	if code < 0 {
		return 0, fmt.Errorf("tensor %q: unknown dtype %q (want f32, f16, bf16 or i64)", t.Name, t.DType)
	}
	if len(t.Shape) > maxNDim {
		return 0, fmt.Errorf("tensor %q has %d dims (at most %d)", t.Name, len(t.Shape), maxNDim)
	}
	numel := int64(1)
	for _, d := range t.Shape {
		if d < 0 || d > math.MaxInt32 {
			return 0, fmt.Errorf("tensor %q: bad dimension %d in shape %v", t.Name, d, t.Shape)
		}
		numel *= int64(d)
		if numel > math.MaxInt32*8 {
			return 0, fmt.Errorf("tensor %q: shape %v is too large", t.Name, t.Shape)
		}
	}
	floatLen, intLen := int64(len(t.F32)), int64(len(t.I64))
	if t.DType == DTypeI64 && (intLen != numel || floatLen != 0) ||
		t.DType != DTypeI64 && (floatLen != numel || intLen != 0) {
		return 0, fmt.Errorf("tensor %q: shape %v needs %d %s values, have %d float32 and %d int64",
			t.Name, t.Shape, numel, t.DType, floatLen, intLen)
	}
	return byte(code), nil
}

// writeTensorData encodes a tensor's values in chunks.
func writeTensorData(w io.Writer, t *Tensor) error {
	const chunk = 16384
	buf := make([]byte, 0, chunk*8)
	le := binary.LittleEndian
	n := max(len(t.F32), len(t.I64))
	for start := 0; start < n; start += chunk {
		buf = buf[:0]
		for i := start; i < min(n, start+chunk); i++ {
			switch t.DType {
			case DTypeF32:
				buf = le.AppendUint32(buf, math.Float32bits(t.F32[i]))
			case DTypeF16:
				buf = le.AppendUint16(buf, kernels.F32ToF16Bits(t.F32[i]))
			case DTypeBF16:
				buf = le.AppendUint16(buf, kernels.F32ToBF16Bits(t.F32[i]))
			case DTypeI64:
				buf = le.AppendUint64(buf, uint64(t.I64[i]))
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// hashOf is the checksum of b (the bytes before a file's trailer).
func hashOf(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}
