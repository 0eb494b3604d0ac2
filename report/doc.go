// Package report is what a run leaves behind for reading: the Result each
// run writes to results/<spec>-<run>.json and reads back (results.go,
// results_json.go: JSON has no NaN, so non-finite numbers are null), the
// compare table, resnetlab report's tables against the reference accuracy
// and against peer training logs (report.go, report_reference.go,
// report_peer.go), and the SVG plots of accuracy and loss per epoch
// (plot.go, plot_draw.go, plot_font.go).
//
// Imports: spec (plugin names, sizes, the result file name) and fsutil;
// never runner, tui or cmd.
package report
