package fsutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes path through write so that path is either left as
// it was or replaced whole: the data goes to a temporary file in the same
// directory (same file system, so the rename is atomic), which is synced,
// renamed over path, and the directory synced so the rename is durable.
// On any error the temporary file is removed and path is untouched.
func WriteFileAtomic(path string, write func(w io.Writer) error) error {
	return writeVia(path, write, os.Rename)
}

// ErrExists is WriteFileNew's error when path exists.
var ErrExists = errors.New("already exists")

// WriteFileNew is WriteFileAtomic for a file that must not exist: the
// complete temporary file is hard-linked to path, which fails if path
// appeared meanwhile, so no file is ever replaced (a rename would) and
// path is absent or whole after a crash. Where the file system has no hard
// links (FAT, some network file systems) a rename after a last look does
// the same but for that instant. An existing path is an error wrapping
// ErrExists.
func WriteFileNew(path string, write func(w io.Writer) error) error {
	return writeVia(path, write, linkNew)
}

func linkNew(tmp, path string) error {
	err := os.Link(tmp, path)
	if errors.Is(err, fs.ErrExist) {
		return ErrExists
	}
	if err == nil {
		return nil
	}
	if _, lerr := os.Lstat(path); lerr == nil {
		return ErrExists
	}
	return os.Rename(tmp, path)
}

// writeVia writes a synced temporary file beside path and gives it the
// name path with place; the temporary name is removed in every case.
func writeVia(path string, write func(w io.Writer) error, place func(tmp, path string) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		f.Close() // after a successful Close this only returns an error, ignored
		os.Remove(tmp)
		if err != nil {
			err = fmt.Errorf("cannot write %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil { // CreateTemp makes 0600 files
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = place(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
