package ckpt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A run holds its checkpoint directory for its whole lifetime through an
// exclusive flock on a lock file inside it, so two runs (two processes, or
// two resnetlab commands on one host) cannot interleave their saves. The
// lock file names its holder (pid, host, run) for the error the second run
// gets. The kernel drops the lock when the holder's process dies, so a
// killed run never leaves a directory locked (its file stays, and the next
// run takes it over); a run that ends removes the file.

// LockName is the lock file inside a checkpoint directory.
const LockName = ".resnetlab.lock"

// DirLock is a held checkpoint-directory lock.
type DirLock struct {
	f       *os.File
	path    string
	created []string // the directories LockDir made, deepest first
}

// LockDir creates dir if needed and locks it for run, or says
// who holds it. The directories it creates are removed again by Release
// (or by a failed LockDir) when nothing was put in them: a run that saved
// no checkpoint leaves no empty directory behind.
func LockDir(dir, run string) (l *DirLock, err error) {
	created := missingDirs(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		removeEmpty(created)
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			removeEmpty(created)
		}
	}()
	path := filepath.Join(dir, LockName)
	for range 5 {
		f, err := lockFile(dir, path)
		if err != nil {
			return nil, err
		}
		// The holder removes the file when it ends: a lock taken on a file
		// removed meanwhile guards nothing, so take the new one.
		if st, err := os.Lstat(path); err == nil && sameFile(f, st) {
			host, _ := os.Hostname()
			if f.Truncate(0) == nil {
				fmt.Fprintf(f, "pid %d host %s run %s\n", os.Getpid(), host, run)
			}
			return &DirLock{f: f, path: path, created: created}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("checkpoint directory %s: lock file %s keeps being replaced", dir, path)
}

// lockFile opens path and takes its exclusive lock without waiting.
func lockFile(dir, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: lock file: %w", dir, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("checkpoint directory %s: lock file %s is not a regular file", dir, path)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("checkpoint directory %s is in use by another run (%s); wait for it to end, "+
				"or give this run another checkpoint directory", dir, holder)
		}
		return nil, fmt.Errorf("checkpoint directory %s: lock %s: %w", dir, path, err)
	}
	return f, nil
}

func sameFile(f *os.File, st os.FileInfo) bool {
	fst, err := f.Stat()
	return err == nil && os.SameFile(fst, st)
}

// lockHolder is what the lock file says about its holder.
func lockHolder(f *os.File) string {
	buf := make([]byte, 512)
	n, _ := f.ReadAt(buf, 0)
	s := strings.TrimSpace(string(buf[:n]))
	if s == "" || strings.ContainsAny(s, "\n\r") {
		return "holder unknown"
	}
	return s
}

// Release removes the lock file and unlocks the directory (closing the
// file drops the flock); removing first means a run waiting on the old
// file sees it replaced and locks afresh. Then it removes the directories
// LockDir created that are still empty (a run that saved nothing).
func (l *DirLock) Release() {
	if l != nil && l.f != nil {
		os.Remove(l.path)
		l.f.Close()
		l.f = nil
		removeEmpty(l.created)
		l.created = nil
	}
}

// missingDirs lists dir and those of its ancestors that do not exist,
// deepest first: what MkdirAll(dir) would create.
func missingDirs(dir string) []string {
	var out []string
	for p := filepath.Clean(dir); ; {
		if _, err := os.Lstat(p); err == nil || !errors.Is(err, os.ErrNotExist) {
			return out
		}
		out = append(out, p)
		parent := filepath.Dir(p)
		if parent == p {
			return out
		}
		p = parent
	}
}

// removeEmpty removes dirs in order (deepest first) while they are empty:
// os.Remove refuses a directory that holds anything, so another run's
// files, or a directory another run made meanwhile, stay.
func removeEmpty(dirs []string) {
	for _, d := range dirs {
		if os.Remove(d) != nil {
			return
		}
	}
}
