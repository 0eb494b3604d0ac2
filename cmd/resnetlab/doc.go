// Command resnetlab is the command line: run (the live UI on a terminal,
// the headless printer otherwise), launch (torchrun's role: the ranks of
// one run as processes), eval, export, import, data, compare, report,
// bench and help. It parses flags, opens files the user names,
// prints errors as one line each and maps them to exit codes (errfmt.go);
// the work itself is the runner's.
//
// Imports: main imports tui, runner, ckpt (checkpoint names for --resume
// and eval), spec, report, comm (the launcher's rendezvous), fsutil, data
// (data fetch), kernels (the profile tables of bench) and
// charmbracelet/x/term (is stdout a terminal).
package main
