// Package tui is resnetlab's terminal front end (bubbletea v2). It reads the
// runner's event stream and sends runs commands through the callbacks in
// Options; the runner knows nothing about it.
//
// Structure: the root Model routes messages; every run owns one component
// per pane (progress, memory, chunk strip, curves, log) that updates itself
// from the run's events; the header, comparison view and dialogs render from
// that state.
//
// Imports: tui imports runner (its events, commands and result types: never the
// training internals), report and spec (the result and spec types those
// events carry), ckpt (only Ref, the name of a checkpoint the r key resumes
// from), the Charm libraries and the standard library.
package tui
