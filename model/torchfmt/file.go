package torchfmt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"resnetlab/fsutil"
	"strings"
)

// ReadFile reads a state dict from path, choosing the format by content: a zip
// local-file signature means torch.save, a header length within the format's
// limit followed by '{' means safetensors. Metadata is dropped.
func ReadFile(path string) ([]Tensor, error) {
	ts, _, err := ReadFileMeta(path)
	return ts, err
}

// ReadFileMeta is ReadFile plus the file's string metadata: safetensors'
// __metadata__, or a .pth file's MetadataRecord; nil when there is none.
func ReadFileMeta(path string) ([]Tensor, map[string]string, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	head := make([]byte, 9)
	n, _ := f.ReadAt(head, 0)
	var ts []Tensor
	var md map[string]string
	switch kind := sniff(head[:n], fi.Size()); kind {
	case "pth":
		ts, md, err = ReadPthMeta(f, fi.Size())
	case "safetensors":
		ts, md, err = ReadSafetensors(f, fi.Size())
	default:
		err = fmt.Errorf("%s", kind)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return ts, md, nil
}

// sniff returns "pth", "safetensors" or a message saying why it is neither.
func sniff(head []byte, size int64) string {
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return "pth"
	case len(head) == 9 && head[8] == '{' && binary.LittleEndian.Uint64(head) <= maxHeaderLen:
		// A length longer than the file still means safetensors: the
		// reader then says the file is truncated, and by how much.
		return "safetensors"
	case len(head) >= 2 && head[0] == opProto && head[1] <= 5:
		return "legacy torch.save format (before PyTorch 1.6) is not supported; re-save it with a current torch.save"
	}
	if size < 9 { // say so: an empty or cut file is a common case
		return fmt.Sprintf("neither a torch.save zip archive nor a safetensors file (it has only %d bytes)", size)
	}
	return "neither a torch.save zip archive nor a safetensors file"
}

// WriteFile writes ts to path as safetensors if the name ends in .safetensors and
// as a torch.save archive otherwise (named, like torch does, after the file's base
// name). It writes a temporary file and renames it, so a crash never leaves a
// half-written checkpoint under the final name.
func WriteFile(path string, ts []Tensor) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if strings.HasSuffix(path, ".safetensors") {
		err = WriteSafetensors(tmp, ts, nil)
	} else {
		err = writePth(tmp, ts, archiveName(path), nil)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}

// archiveName mirrors torch: the file's base name without extension, or "archive"
// when that would be empty or unsafe as a zip folder name.
func archiveName(path string) string {
	base := filepath.Base(path)
	if i := strings.LastIndexByte(base, '.'); i >= 0 {
		base = base[:i]
	}
	if base == "" || base == "." || strings.ContainsAny(base, "/\\") {
		return "archive"
	}
	return base
}
