// Package experiments holds resnetlab's experiment specs (*.toml); its test
// keeps every one of them valid. It has no code.
package experiments
