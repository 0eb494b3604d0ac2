//go:build !linux

package main

// probeCreate says why no file can be created in the existing directory
// dir, or nil, by creating a temporary file there and removing it.
func probeCreate(dir string) error { return probeNamed(dir) }
