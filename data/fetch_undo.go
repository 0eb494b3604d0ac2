package data

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// created records the directories and files one fetch creates, so that a
// fetch that fails removes them again: it leaves nothing it made (an empty
// ./data included) and touches nothing that was there before it.
type created struct{ paths []string }

// mkdirAll is os.MkdirAll(dir, 0o755) that records every folder it makes.
func (c *created) mkdirAll(dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			break // let Mkdir below report it
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue // made meanwhile by someone else: not ours
			}
			return err
		}
		c.paths = append(c.paths, missing[i])
	}
	return os.MkdirAll(dir, 0o755) // reports a non-directory in the way
}

// file records path, about to be created (call it before the rename or
// link that makes it) when it does not exist yet.
func (c *created) file(path string) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		c.paths = append(c.paths, path)
	}
}

// remove deletes what was recorded, newest first; a folder that is not
// empty (something else put a file in it meanwhile) stays.
func (c *created) remove() {
	for i := len(c.paths) - 1; i >= 0; i-- {
		os.Remove(c.paths[i])
	}
	c.paths = nil
}
