package torchfmt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// A zip archive ends with its central directory and an end record
// (end-of-central-directory, EOCD): a file cut short loses them first, and
// archive/zip then only says "not a valid zip file". zipCut tells that case
// apart by walking the local entry headers from the front, which torch.save
// (and WritePth) fill in with each entry's size.

const (
	eocdLen     = 22               // the end record without its comment
	maxEOCDScan = eocdLen + 0xffff // the end record plus the longest comment
)

// zipCut says how a zip that archive/zip could not open was cut short, with
// sizes, or "" when it does not look cut (its end record is there, or its
// entries cannot be walked). Every read is bounded by size.
func zipCut(r io.ReaderAt, size int64) string {
	if hasEOCD(r, size) {
		return ""
	}
	var off int64
	last := ""
	for off < size {
		var h [localHeaderLen]byte
		n, _ := r.ReadAt(h[:], off)
		switch sig := string(h[:min(n, 4)]); {
		case sig == "PK\x01\x02": // probably cut in the central directory
			return fmt.Sprintf("the file has %d bytes and no complete zip end record after its central directory, which starts at byte %d", size, off)
		case n < 4: // cut in the next entry's signature
			return endMissing(last, off, size)
		case sig != "PK\x03\x04":
			return "" // not a local header: damaged rather than cut
		case n < localHeaderLen:
			return fmt.Sprintf("the file stops at byte %d, inside the header of the zip entry at byte %d", size, off)
		}
		end, name, msg := walkEntry(r, h, off, size)
		if end == 0 {
			return msg
		}
		off, last = end, name
	}
	return endMissing(last, off, size)
}

// walkEntry reads the name of the local entry with header h at off and
// returns where its data ends; a message instead when the entry is cut,
// and end 0 with no message when its size is not in the header.
func walkEntry(r io.ReaderAt, h [localHeaderLen]byte, off, size int64) (int64, string, string) {
	flags := binary.LittleEndian.Uint16(h[6:])
	csize := binary.LittleEndian.Uint32(h[18:])
	nameLen := int64(binary.LittleEndian.Uint16(h[26:]))
	extraLen := int64(binary.LittleEndian.Uint16(h[28:]))
	if flags&0x8 != 0 || csize == 0xffffffff { // size in a data descriptor or zip64 field
		return 0, "", ""
	}
	if off+localHeaderLen+nameLen > size {
		return 0, "", fmt.Sprintf("the file stops at byte %d, inside the header of the zip entry at byte %d", size, off)
	}
	name := make([]byte, nameLen) // at most 64 KiB, and within the file
	r.ReadAt(name, off+localHeaderLen)
	end := off + localHeaderLen + nameLen + extraLen + int64(csize)
	if end > size {
		return 0, "", fmt.Sprintf("zip entry %s needs bytes up to %d, the file has %d", name, end, size)
	}
	return end, string(name), ""
}

// endMissing describes a file whose entries are whole but whose central
// directory or end record is missing.
func endMissing(last string, off, size int64) string {
	if last == "" {
		return fmt.Sprintf("the file has %d bytes and no zip entry, central directory or end record", size)
	}
	return fmt.Sprintf("the file has %d bytes and ends before the zip's central directory and end record; "+
		"its entries are whole up to %s, which ends at byte %d", size, last, off)
}

// hasEOCD reports whether a whole end record is in the file's last
// maxEOCDScan bytes, where the zip format puts it.
func hasEOCD(r io.ReaderAt, size int64) bool {
	n := min(size, maxEOCDScan)
	tail := make([]byte, n)
	if _, err := r.ReadAt(tail, size-n); err != nil && err != io.EOF {
		return false
	}
	// The whole record must fit: a file cut inside it keeps the signature.
	return n >= eocdLen && bytes.Contains(tail[:n-eocdLen+4], []byte("PK\x05\x06"))
}
