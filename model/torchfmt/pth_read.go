package torchfmt

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ReadPth reads a torch.save zip archive holding a state dict (a dict or
// OrderedDict of str -> tensor) of float32, float16, bfloat16 or int64 tensors.
// Like torch.load(weights_only=True) it refuses any pickle global beyond the few a
// state dict needs. Tensors come back in the dict's order.
func ReadPth(r io.ReaderAt, size int64) ([]Tensor, error) {
	ts, _, err := ReadPthMeta(r, size)
	return ts, err
}

// ReadPthMeta is ReadPth plus the string map of the archive's
// MetadataRecord (nil when the archive has none, as torch.save writes it).
func ReadPthMeta(r io.ReaderAt, size int64) ([]Tensor, map[string]string, error) {
	a, err := openPth(r, size)
	if err != nil {
		return nil, nil, err
	}
	if err := a.checkHeaderRecords(); err != nil {
		return nil, nil, err
	}
	md, err := a.metadata()
	if err != nil {
		return nil, nil, err
	}
	ts, err := a.tensors()
	return ts, md, err
}

// metadata decodes MetadataRecord, a JSON object of strings, if present.
func (a *pthArchive) metadata() (map[string]string, error) {
	if a.files[a.prefix+"/"+MetadataRecord] == nil {
		return nil, nil
	}
	js, err := a.record(MetadataRecord)
	if err != nil {
		return nil, err
	}
	var md map[string]string
	if err := json.Unmarshal(js, &md); err != nil || md == nil {
		return nil, fmt.Errorf("pth: %s/%s is not a JSON object of strings", a.prefix, MetadataRecord)
	}
	return md, nil
}

// tensors unpickles data.pkl into the state dict.
func (a *pthArchive) tensors() ([]Tensor, error) {
	pkl, err := a.record("data.pkl")
	if err != nil {
		return nil, err
	}
	obj, err := unpickle(pkl, a.persistentLoad)
	if err != nil {
		return nil, fmt.Errorf("pth: %s/data.pkl: %w", a.prefix, err)
	}
	return a.stateDict(obj)
}

// pthArchive is an opened torch.save zip: every record lives under prefix/.
type pthArchive struct {
	size     int64
	prefix   string
	files    map[string]*zip.File
	storages map[string]*pyStorage
	raw      map[string][]byte
}

func openPth(r io.ReaderAt, size int64) (*pthArchive, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		if cut := zipCut(r, size); cut != "" {
			return nil, fmt.Errorf("pth: truncated: %s", cut)
		}
		return nil, fmt.Errorf("pth: not a readable zip archive: %w", err)
	}
	if len(zr.File) == 0 {
		return nil, fmt.Errorf("pth: zip archive has no entries")
	}
	// Like torch, the first entry's top folder names the archive.
	first := zr.File[0].Name
	slash := strings.IndexByte(first, '/')
	if slash <= 0 {
		return nil, fmt.Errorf("pth: first zip entry %q is not inside an archive folder", first)
	}
	a := &pthArchive{size: size, prefix: first[:slash], files: map[string]*zip.File{},
		storages: map[string]*pyStorage{}, raw: map[string][]byte{}}
	for _, f := range zr.File {
		if a.files[f.Name] != nil {
			return nil, fmt.Errorf("pth: zip entry %q appears twice", f.Name)
		}
		a.files[f.Name] = f
	}
	return a, nil
}

// checkHeaderRecords requires the format version torch requires, and refuses
// big-endian data (torch writes byteorder since 2.1; older files are little-endian).
func (a *pthArchive) checkHeaderRecords() error {
	name := "version"
	if a.files[a.prefix+"/"+name] == nil && a.files[a.prefix+"/.data/version"] != nil {
		name = ".data/version"
	}
	v, err := a.record(name)
	if err != nil {
		return err
	}
	if _, err := strconv.ParseUint(strings.TrimSpace(string(v)), 10, 64); err != nil {
		return fmt.Errorf("pth: %s/%s holds %q, want a decimal format version", a.prefix, name, v)
	}
	if a.files[a.prefix+"/byteorder"] == nil {
		return nil
	}
	bo, err := a.record("byteorder")
	if err != nil {
		return err
	}
	if string(bo) != "little" {
		return fmt.Errorf("pth: %s/byteorder is %q; only little-endian archives are supported", a.prefix, bo)
	}
	return nil
}

// record reads prefix/name in full, verifying its CRC.
func (a *pthArchive) record(name string) ([]byte, error) {
	full := a.prefix + "/" + name
	f := a.files[full]
	if f == nil {
		return nil, fmt.Errorf("pth: zip entry %s is missing (not a complete torch.save archive)", full)
	}
	if f.Method != zip.Store {
		return nil, fmt.Errorf("pth: zip entry %s is compressed (method %d); torch.save stores entries uncompressed", full, f.Method)
	}
	n := f.UncompressedSize64
	if n != f.CompressedSize64 || n > uint64(a.size) {
		return nil, fmt.Errorf("pth: zip entry %s claims %d bytes in a %d-byte file", full, n, a.size)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("pth: opening zip entry %s: %w", full, err)
	}
	defer rc.Close()
	buf := make([]byte, n+1) // one spare byte so the reader reaches EOF and checks the CRC
	got, err := io.ReadFull(rc, buf)
	if uint64(got) != n || (err != io.ErrUnexpectedEOF && err != io.EOF) {
		if err == nil || err == io.ErrUnexpectedEOF || err == io.EOF {
			err = fmt.Errorf("got %d bytes, want %d", got, n)
		}
		return nil, fmt.Errorf("pth: reading zip entry %s: %w", full, err)
	}
	return buf[:n], nil
}

// persistentLoad resolves ('storage', torch.XStorage, key, location, numel), the
// persistent id torch.save writes for each storage; one key is one storage even
// when several tensors view it.
func (a *pthArchive) persistentLoad(pid pyTuple) (any, error) {
	if len(pid) != 5 || pid[0] != "storage" {
		return nil, fmt.Errorf("persistent id must be ('storage', type, key, location, numel)")
	}
	g, _ := pid[1].(pyGlobal)
	dtype := storageDTypes[g.full]
	key, ok1 := pid[2].(string)
	_, ok2 := pid[3].(string)
	numel, ok3 := pid[4].(int64)
	if dtype == "" || !ok1 || !ok2 || !ok3 || numel < 0 {
		return nil, fmt.Errorf("persistent id must be ('storage', torch.XStorage, str key, str location, int numel)")
	}
	if key == "" || strings.ContainsAny(key, "/\\") || key == "." || key == ".." {
		return nil, fmt.Errorf("storage key %q is not a plain record name", key)
	}
	if st := a.storages[key]; st != nil {
		if st.dtype != dtype || st.numel != numel {
			return nil, fmt.Errorf("storage %s is used as %d %s elements and as %d %s elements", key, st.numel, st.dtype, numel, dtype)
		}
		return st, nil
	}
	st := &pyStorage{key: key, dtype: dtype, numel: numel}
	a.storages[key] = st
	return st, nil
}

// storageData loads and size-checks data/<key> once.
func (a *pthArchive) storageData(st *pyStorage) ([]byte, error) {
	if raw, ok := a.raw[st.key]; ok {
		return raw, nil
	}
	raw, err := a.record("data/" + st.key)
	if err != nil {
		return nil, err
	}
	if want := uint64(st.numel) * uint64(dtypeSize(st.dtype)); uint64(len(raw)) != want {
		return nil, fmt.Errorf("pth: %s/data/%s has %d bytes, but the pickle declares %d %s elements (%d bytes)",
			a.prefix, st.key, len(raw), st.numel, st.dtype, want)
	}
	a.raw[st.key] = raw
	return raw, nil
}

// stateDict turns the unpickled top-level dict into tensors.
func (a *pthArchive) stateDict(obj any) ([]Tensor, error) {
	d, ok := obj.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("pth: the pickled object is a %s, want a state dict (dict of str -> tensor)", typeName(obj))
	}
	ts := make([]Tensor, 0, len(d.keys))
	budget := 16*a.size + 1<<16
	for i, k := range d.keys {
		name, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("pth: state dict key #%d is a %s, want str", i, typeName(k))
		}
		v, ok := d.vals[i].(*pyTensor)
		if !ok {
			return nil, fmt.Errorf("pth: state dict entry %q is a %s, want a tensor", name, typeName(d.vals[i]))
		}
		raw, err := a.storageData(v.storage)
		if err != nil {
			return nil, fmt.Errorf("%w (for tensor %q)", err, name)
		}
		t, err := materialize(name, v, raw, &budget)
		if err != nil {
			return nil, fmt.Errorf("pth: %w", err)
		}
		ts = append(ts, t)
	}
	return ts, nil
}
