package data

import (
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
)

// FormatError reports a data file whose bytes are not what the format
// requires. Offset is the byte offset of the problem in the (decompressed)
// stream, or -1 when it concerns the file as a whole.
type FormatError struct {
	File     string
	Offset   int64
	Expected string
	Found    string
}

func (e *FormatError) Error() string {
	at := ""
	if e.Offset >= 0 {
		at = fmt.Sprintf(" at byte %d", e.Offset)
	}
	return fmt.Sprintf("data: %s%s: expected %s, found %s", e.File, at, e.Expected, e.Found)
}

// NotFoundError reports a data set that is in none of the searched places.
type NotFoundError struct {
	Dataset  string
	Searched []string
	Hint     string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("data: %s not found; searched %s; %s",
		e.Dataset, strings.Join(e.Searched, ", "), e.Hint)
}

// isGzipErr tells whether err comes from a damaged gzip/deflate stream, so a
// reader can say "corrupt gzip" rather than blame the format inside.
func isGzipErr(err error) bool {
	var ce flate.CorruptInputError
	return errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.As(err, &ce)
}

// gzipError wraps a gzip failure naming the file.
func gzipError(file string, err error) error {
	return fmt.Errorf("data: %s: corrupt gzip stream: %w", file, err)
}
