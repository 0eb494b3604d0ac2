package main

import (
	"errors"
	"io/fs"
	"os"
)

// probeNamed creates a temporary file in the existing directory dir and
// removes it at once: it changes dir's modification time, so probeCreate
// uses it only where an unnamed file cannot be made.
func probeNamed(dir string) error {
	f, err := os.CreateTemp(dir, ".resnetlab-probe-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err // the caller names dir
		}
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}
