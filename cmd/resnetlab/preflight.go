package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"resnetlab/ckpt"
	"resnetlab/runner"
	"resnetlab/spec"
)

// checkPaths runs before any data is loaded or model built, so a run that
// could not save its work fails in a second instead of after hours of
// training: every run that resumes finds its checkpoint, every run that
// saves checkpoints can create and write its directory, and the results
// directory is writable. Each problem names the key (or flag) and the path.
func checkPaths(s *spec.Spec, cells []spec.Cell, opts runner.RunOptions) error {
	var errs []error
	if from := opts.StartFrom(s); !from.IsZero() {
		for _, c := range cells {
			errs = append(errs, checkResume(s, c, from, !opts.Resume.IsZero()))
		}
	}
	if s.Interval > 0 {
		for _, c := range cells {
			if err := checkWritable(c.CheckpointDir); err != nil {
				errs = append(errs, fmt.Errorf("%s: key `checkpoint`: run %s cannot write checkpoints in %q: %v "+
					"(want a directory this user can create and write)", s.Where("checkpoint"), c.ID, c.CheckpointDir, err))
			}
		}
	}
	if err := checkWritable(s.ResultsDir); err != nil {
		where := s.Where("results_dir") + ": key `results_dir`"
		if opts.ResultsDir != "" {
			where = progName() + ": --results" // a flag, not a spec line: named as the other flag errors are
		}
		errs = append(errs, fmt.Errorf("%s: cannot write results in %q: %v (want a directory this user can create and write)",
			where, s.ResultsDir, err))
	}
	return errors.Join(errs...)
}

// checkResume says why cell c cannot resume from checkpoint from, or nil.
func checkResume(s *spec.Spec, c spec.Cell, from ckpt.Ref, fromFlag bool) error {
	where := s.Where("resume") + ": key `resume`"
	if fromFlag { // a flag, not a spec line: named as the other flag errors are
		where = fmt.Sprintf("%s: --resume %s", progName(), from)
	}
	have, err := ckpt.ListRefs(c.CheckpointDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: run %s has no checkpoint directory %q (it is the spec's checkpoint = %q expanded)",
			where, c.ID, c.CheckpointDir, s.Checkpoint)
	case err != nil:
		return fmt.Errorf("%s: run %s: %v", where, c.ID, err)
	case slices.Contains(have, from):
		return nil
	case len(have) == 0:
		return fmt.Errorf("%s: run %s: no checkpoint of %s in %q (it holds no complete checkpoint)",
			where, c.ID, from.Describe(), c.CheckpointDir)
	}
	return fmt.Errorf("%s: run %s: no checkpoint of %s in %q (checkpoints there: %s)",
		where, c.ID, from.Describe(), c.CheckpointDir, ckpt.JoinRefs(have))
}

// checkWritable says why this user could not create dir (where it is
// missing) and write in it, leaving the disk as it was: a run that fails
// these checks, or any later one, must. The nearest existing ancestor of
// dir must be a directory (a path through a regular file fails here) that
// this user may write in and search; access(2) also reports a read-only
// file system. access(2) says yes to root for any directory, /proc and
// /sys too, so a file is then really created there (see probeCreate).
func checkWritable(dir string) error {
	p := filepath.Clean(dir)
	for {
		st, err := os.Stat(p)
		switch {
		case err == nil && !st.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		case err == nil:
			if err := syscall.Access(p, accessWrite|accessSearch); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := probeCreate(p); err != nil {
				return fmt.Errorf("%s: cannot create a file there: %w", p, err)
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return err
		}
		p = parent
	}
}

// access(2) modes (W_OK, X_OK).
const (
	accessWrite  = 0x2
	accessSearch = 0x1
)
