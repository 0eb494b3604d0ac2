package torchfmt

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strconv"
)

// recordAlign is the alignment torch's PyTorchStreamWriter gives every record's
// data (kFieldAlignment), so storages can be memory-mapped.
const recordAlign = 64

// formatVersion is the archive format version torch.save writes for plain tensors.
const formatVersion = "3\n"

// WritePth writes ts as torch.save(state_dict) does: a zip archive of stored
// entries archive/data.pkl (the pickled OrderedDict), archive/byteorder,
// archive/data/<i> (one raw little-endian storage per tensor) and archive/version,
// each entry's data aligned to 64 bytes. torch.load(f, weights_only=True) reads it.
func WritePth(w io.Writer, ts []Tensor) error {
	return writePth(w, ts, "archive", nil)
}

// WritePthMeta is WritePth plus md as a JSON object in the record
// archive/MetadataRecord. torch.load reads only the records it knows, so
// the file still loads with torch.load(f, weights_only=True).
func WritePthMeta(w io.Writer, ts []Tensor, md map[string]string) error {
	return writePth(w, ts, "archive", md)
}

// MetadataRecord is the archive record (under the archive folder) that
// carries resnetlab's string metadata in a .pth file.
const MetadataRecord = "resnetlab/metadata.json"

func writePth(w io.Writer, ts []Tensor, archive string, md map[string]string) error {
	var js []byte
	if md != nil {
		var err error
		if js, err = json.Marshal(md); err != nil {
			return fmt.Errorf("pth: metadata: %w", err)
		}
	}
	return writePthRecord(w, ts, archive, js)
}

// writePthRecord writes the archive with mdJSON (nil: none) as the
// metadata record.
func writePthRecord(w io.Writer, ts []Tensor, archive string, mdJSON []byte) error {
	if err := validateAll(ts); err != nil {
		return fmt.Errorf("pth: %w", err)
	}
	zw := &alignedZip{zw: zip.NewWriter(w)}
	zw.add(archive+"/data.pkl", pickleStateDict(ts))
	zw.add(archive+"/byteorder", []byte("little"))
	var buf []byte
	for i, t := range ts {
		buf = appendLE(buf[:0], t)
		if len(buf) >= math.MaxUint32 {
			return fmt.Errorf("pth: tensor %q has %d bytes; entries of 4 GiB or more are not supported", t.Name, len(buf))
		}
		zw.add(archive+"/data/"+strconv.Itoa(i), buf)
	}
	if mdJSON != nil {
		zw.add(archive+"/"+MetadataRecord, mdJSON)
	}
	zw.add(archive+"/version", []byte(formatVersion))
	if zw.err != nil {
		return fmt.Errorf("pth: %w", zw.err)
	}
	return zw.zw.Close()
}

// alignedZip writes stored entries whose data starts on a recordAlign boundary,
// padding the local header's extra field the way torch does (a "FB" field of 'Z's).
// It tracks the offset itself since zip.Writer buffers its output.
type alignedZip struct {
	zw  *zip.Writer
	off int64
	err error
}

const localHeaderLen = 30

// dosDate1980 is 1980-01-01 in MS-DOS date format (year-1980<<9 | month<<5 | day).
const dosDate1980 = 1<<5 | 1

func (a *alignedZip) add(name string, data []byte) {
	if a.err != nil {
		return
	}
	start := a.off + localHeaderLen + int64(len(name)) + 4
	pad := (recordAlign - start%recordAlign) % recordAlign
	extra := make([]byte, 4+pad)
	extra[0], extra[1] = 'F', 'B'
	extra[2], extra[3] = byte(pad), byte(pad>>8)
	for i := 4; i < len(extra); i++ {
		extra[i] = 'Z'
	}
	fh := &zip.FileHeader{
		Name:               name,
		Method:             zip.Store,
		CRC32:              crc32.ChecksumIEEE(data),
		CompressedSize64:   uint64(len(data)),
		UncompressedSize64: uint64(len(data)),
		Extra:              extra,
		// 1980-01-01 00:00, the earliest DOS date; the zero value would
		// read as month 0, day 0. Modified cannot be used: it adds an
		// extended-timestamp field that breaks the alignment above.
		ModifiedDate: dosDate1980, //lint:ignore SA1019 see above
	}
	fw, err := a.zw.CreateRaw(fh)
	if err == nil {
		_, err = fw.Write(data)
	}
	a.err = err
	a.off = start + pad + int64(len(data))
}
