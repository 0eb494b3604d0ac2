package ckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"resnetlab/fsutil"
)

// List returns, in increasing order, the epochs whose end-of-
// epoch checkpoint has all three files in dir (mid-epoch saves are in
// ListRefs). A missing dir gives an error matching
// fs.ErrNotExist.
func List(dir string) ([]int, error) {
	refs, err := ListRefs(dir)
	if err != nil {
		return nil, err
	}
	var epochs []int
	for _, r := range refs {
		if r.Step == 0 {
			epochs = append(epochs, r.Epoch)
		}
	}
	return epochs, nil
}

// MetaInt reads an integer from checkpoint metadata (JSON numbers decode
// as float64).
func MetaInt(meta map[string]any, key string) (int, error) {
	v, ok := meta[key]
	if !ok {
		return 0, fmt.Errorf("metadata has no %q", key)
	}
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("metadata %q = %v (want an integer)", key, v)
	}
	return int(f), nil
}

// MetaString reads a string from checkpoint metadata.
func MetaString(meta map[string]any, key string) (string, error) {
	v, ok := meta[key]
	if !ok {
		return "", fmt.Errorf("metadata has no %q", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("metadata %q = %v (want a string)", key, v)
	}
	return s, nil
}

// ReadMeta reads only the kind and metadata of a checkpoint file
// (its header), without loading or verifying the tensors: for listings such
// as a resume picker. ReadFile does the full, checked read.
func ReadMeta(path string) (kind string, meta map[string]any, err error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("checkpoint %s: file not found: %w", path, fs.ErrNotExist)
		}
		var fe *fsutil.Error
		if errors.As(err, &fe) {
			return "", nil, fmt.Errorf("checkpoint %w", err)
		}
		return "", nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	defer f.Close()
	head, err := readHead(f)
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	c := &cursor{b: head}
	if err := c.preamble(); err != nil {
		return "", nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if _, err = c.u64("the file length"); err == nil {
		kind, err = c.str("the kind", maxKindLen)
	}
	if err == nil {
		meta, err = c.meta()
	}
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return kind, meta, nil
}

// readHead reads the bytes up to the end of the metadata block.
func readHead(r io.Reader) ([]byte, error) {
	buf := make([]byte, 24)
	if n, err := io.ReadFull(r, buf); err != nil {
		return buf[:n], nil // short: the cursor reports the truncation
	}
	kindLen := binary.LittleEndian.Uint32(buf[20:])
	if kindLen > maxKindLen {
		return buf, nil
	}
	buf = append(buf, make([]byte, kindLen+4)...)
	if n, _ := io.ReadFull(r, buf[24:]); n < len(buf)-24 {
		return buf[:24+n], nil
	}
	metaLen := binary.LittleEndian.Uint32(buf[len(buf)-4:])
	if metaLen > maxMetaLen {
		return buf, nil
	}
	rest := make([]byte, metaLen)
	n, _ := io.ReadFull(r, rest)
	return append(buf, rest[:n]...), nil
}
