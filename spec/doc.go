// Package spec is the spec language: a TOML file that names a grid of
// ResNet-18 training runs. It decodes and validates a spec (spec_parse.go,
// spec_decode.go, spec_check.go: every refusal is a Error naming the
// file, line and key; spec_depth.go and spec_size.go bound what a file may
// ask for), holds the defaults (spec.go), and expands the grid into Cells,
// one per run, with each run's checkpoint directory and result file name
// (grid.go, spec_paths.go), checking every path a run will write before
// anything trains.
//
// Imports: engine (the plugin names), model (its width bounds), fsutil and
// BurntSushi/toml; never runner, report, tui or cmd.
package spec
