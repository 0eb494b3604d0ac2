package main

import (
	"errors"

	"golang.org/x/sys/unix"
)

// probeCreate says why no file can be created in the existing directory
// dir, or nil. It opens an unnamed file there (O_TMPFILE), which no one
// sees and which goes with its descriptor, so nothing on the disk changes,
// not even dir's modification time. A file system that cannot make one
// (procfs, sysfs and a few others: EOPNOTSUPP; EISDIR from a kernel
// without O_TMPFILE) is tried with a named file, created and removed.
func probeCreate(dir string) error {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return unix.Close(fd)
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
		return probeNamed(dir)
	}
	return err
}
