package spec

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// ResultFile is the name of the result file of run in the spec named
// specName: <spec>-<run>.json (just <run>.json when specName is empty). The
// spec name is part of it because run ids repeat across specs
// ("torch_ddp-fp32-1") and results of different specs share the results
// directory.
func ResultFile(specName, run string) string {
	name := run
	if specName != "" {
		name = specName + "-" + run
	}
	return unsafeFileChars.ReplaceAllString(name, "_") + ".json"
}

// maxNameBytes is the longest file name (one path component) the common
// file systems (ext4, xfs, btrfs, tmpfs) accept.
const maxNameBytes = 255

// checkPathLengths checks, before anything trains, every path component a
// run will write: its result file (from the spec's name) and its
// checkpoint directory. Otherwise a too-long name fails only at the end of
// training, with a bare "file name too long".
func (s *Spec) checkPathLengths(cells []Cell) error {
	for _, c := range cells {
		res := ResultFile(s.Name, c.ID)
		if len(res) > maxNameBytes {
			return s.pathError("name", fmt.Sprintf("run %s's result file %q is %d bytes, over the %d a file name may have (want a shorter name)",
				c.ID, shorten(res), len(res), maxNameBytes))
		}
		for _, key := range []string{"results_dir", "checkpoint"} {
			p := s.ResultsDir
			if key == "checkpoint" {
				p = c.CheckpointDir
			}
			if comp := longComponent(p); comp != "" {
				return s.pathError(key, fmt.Sprintf("path component %q is %d bytes, over the %d a file name may have",
					shorten(comp), len(comp), maxNameBytes))
			}
		}
	}
	return nil
}

func (s *Spec) pathError(key, msg string) error {
	return &Error{File: s.File, Line: s.src.line(key), Key: key, Msg: msg}
}

// longComponent returns the first component of p over maxNameBytes, or "".
func longComponent(p string) string {
	for _, comp := range strings.Split(filepath.ToSlash(p), "/") {
		if len(comp) > maxNameBytes {
			return comp
		}
	}
	return ""
}

// shorten keeps a long name readable in a one-line error.
func shorten(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:20] + "..." + s[len(s)-16:]
}

// KeyError is a Error about key, on the line of the spec file that
// sets it (else of its enclosing table, else line 1).
func (s *Spec) KeyError(key, msg string) error {
	return &Error{File: s.File, Line: s.src.line(key), Key: key, Msg: msg}
}

// SetDataDir makes dir the data directory, named by the user: the data is
// then searched for only there.
func (s *Spec) SetDataDir(dir string) { s.DataDir, s.dataDirSet = dir, true }

// DataDirNamed reports whether the spec file or the user named the data
// directory (search only there) rather than taking the default.
func (s *Spec) DataDirNamed() bool { return s.dataDirSet }
