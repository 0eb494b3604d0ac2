package fsutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular and ErrTooLarge classify the errors of this package; test
// for them with errors.Is.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// Error says what is wrong with the file at Path. Its text starts with the
// path, so a caller adds only a noun: fmt.Errorf("checkpoint %w", err).
type Error struct {
	Path   string
	Err    error  // ErrNotRegular or ErrTooLarge
	Detail string // what the file is, or its size against the limit
}

func (e *Error) Error() string {
	if e.Err == ErrNotRegular {
		return e.Path + " is not a regular file (" + e.Detail + ")"
	}
	return e.Path + " is too large (" + e.Detail + ")"
}

func (e *Error) Unwrap() error { return e.Err }

// OpenRegular opens path for reading and returns it only if it is a
// regular file. O_NONBLOCK makes opening a FIFO return at once instead of
// waiting for a writer; the flag is cleared again for regular files.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &Error{path, ErrNotRegular, kind(st.Mode())}
	}
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// ReadFile reads a regular file whole, refusing one larger than limit
// bytes; it never reads more than limit+1 bytes even if the file grows.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, &Error{path, ErrTooLarge, fmt.Sprintf("%d bytes, more than the %d allowed", st.Size(), limit)}
	}
	// Read no more than the size fstat declared (plus one byte to notice
	// growth), so a file cannot make us allocate beyond what it is.
	b, err := io.ReadAll(io.LimitReader(f, min(limit, st.Size())+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, &Error{path, ErrTooLarge, fmt.Sprintf("grew past the %d bytes allowed while being read", limit)}
	}
	return b, nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}
