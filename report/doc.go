// Package report is what a run leaves behind for reading: the Result each
// run writes to results/<spec>-<run>.json and reads back (results.go,
// results_json.go: JSON has no NaN, so non-finite numbers are null), the
// compare table, resnetlab report's tables against the reference accuracy
// and against peer training logs (report.go, report_reference.go,
// report_peer.go), and the comparison figure of a spec's runs, PNG or
// SVG: accuracy and loss per epoch, memory and images/s bars, a legend
// (plot*.go: one scene of shapes, rasterised with an own bitmap font or
// written as SVG text; results/<spec>.png and .svg at a run's end).
//
// Imports: spec (plugin names, sizes, the result file name) and fsutil;
// never runner, tui or cmd.
package report
