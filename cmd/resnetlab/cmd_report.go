package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"resnetlab/data"
	"resnetlab/report"
)

const reportUsage = `Usage: resnetlab report [-o FILE.md] [--plot FILE.png|FILE.svg] [--peer LOG]... [--peer-data NAME]
                        [--reference] FILE|DIR...

Writes a Markdown table of finished runs, one row per run (plugin x precision x
ranks): final test accuracy, best accuracy and its epoch, wall time, mean epoch
time, images/s, peak device memory per rank and status. When an fp32
single-rank run is present (torch_ddp preferred), a column gives every row's
final accuracy minus its, in points (rows on the same data set only).
Arguments are result files written by 'resnetlab run', or directories whose
*.json files are read. Any unreadable input fails the report; nothing is
written then. Each file written is named in a line "wrote FILE" (on standard
error when the table goes to standard output).

Flags:
  -o FILE            write the table to FILE, in a directory that exists
                     (default: standard output)
  --plot FILE        also draw the comparison figure (accuracy and loss per epoch,
                     memory and images/s bars) into FILE, PNG or SVG by its
                     extension, in a directory that exists
  --peer LOG         add the run logged by the PyTorch peer (scripts/torch_peer_resume.py)
                     (its JSON lines); repeatable
  --peer-data NAME   data set of --peer logs that do not name theirs (cut
                     before their summary line): cifar10, fashion-mnist or synthetic
  --reference        add the reference CIFAR-10 accuracies (docs/design.md)

Examples:
  resnetlab report results/
  resnetlab report -o docs/results.md --plot docs/results_acc80.png --peer peer.log --reference results/*.json
`

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func (c *cli) cmdReport(ctx context.Context, args []string) int {
	fs := newFlags("report")
	out := fs.String("o", "", "")
	plot := fs.String("plot", "", "")
	peerData := fs.String("peer-data", "", "")
	reference := fs.Bool("reference", false, "")
	var peerPaths stringList
	fs.Var(&peerPaths, "peer", "")
	pos, done, code := c.parseArgs(fs, reportUsage, args)
	if done {
		return code
	}
	if len(pos) == 0 && len(peerPaths) == 0 {
		return c.usageError("report", "want at least one result file or directory (or --peer LOG)")
	}
	if *peerData != "" {
		canon, err := data.Canonical(*peerData)
		if err != nil { // a misspelt name would leave the peer's row beside no run
			return c.usageError("report", fmt.Sprintf("--peer-data %q: want cifar10, fashion-mnist or synthetic", *peerData))
		}
		*peerData = canon
	}
	err := checkOutPath("-o", *out)
	if err == nil {
		err = checkOutPath("--plot", *plot)
	}
	if err == nil && *plot != "" {
		if _, ferr := report.PlotFormat(*plot); ferr != nil { // a flag value: refused before any file is read
			return c.usageError("report", "--plot "+ferr.Error())
		}
	}
	var rows []report.Row
	if err == nil {
		rows, err = reportRows(pos, peerPaths, *peerData, *reference)
	}
	if err == nil {
		err = writeReport(c, rows, *out, *plot)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab report: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// reportRows reads every input. All bad result files are named at once
// (ReadResults joins their errors); peer logs stop at the first bad one.
func reportRows(args, peerPaths []string, peerData string, reference bool) ([]report.Row, error) {
	var results []*report.Result
	if len(args) > 0 {
		files, err := expandDirs(args)
		if err != nil {
			return nil, err
		}
		if results, err = report.ReadResults(files); err != nil {
			return nil, err
		}
	}
	var peers []*report.PeerLog
	for _, path := range peerPaths {
		p, err := report.ReadPeerLog(path)
		if err != nil {
			return nil, err
		}
		if p.Dataset == "" {
			p.Dataset = peerData
		}
		peers = append(peers, p)
	}
	return report.Build(results, peers, reference), nil
}

// writeReport renders everything before writing anything, so a failed
// plot leaves no half-updated report.
func writeReport(c *cli, rows []report.Row, out, plot string) error {
	var pic bytes.Buffer
	if plot != "" {
		format, err := report.PlotFormat(plot)
		if err != nil {
			return fmt.Errorf("--plot %w", err)
		}
		if err := report.Plot(&pic, rows, format, report.DefaultPlotWidth, report.DefaultPlotHeight); err != nil {
			return err
		}
	}
	md := report.Markdown(rows)
	wrote := c.stdout // "wrote FILE" for each file, as export says it
	if out == "" {
		fmt.Fprint(c.stdout, md)
		wrote = c.stderr // stdout is the Markdown: a redirected report stays only that
	} else if err := writeReportFile("-o", out, []byte(md)); err != nil {
		return err
	} else {
		fmt.Fprintf(wrote, "wrote %s\n", out)
	}
	if plot != "" {
		if err := writeReportFile("--plot", plot, pic.Bytes()); err != nil {
			return err
		}
		fmt.Fprintf(wrote, "wrote %s\n", plot)
	}
	return nil
}

// checkOutPath refuses an output path (of flag, "" for none) that cannot
// be a file: its directory must exist, since a mistyped path must not
// leave new directories behind, and it must not be a directory itself.
// Both outputs are checked before anything is read or written.
func checkOutPath(flag, path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: directory %s does not exist (create it first)", flag, path, dir)
	case err != nil:
		return fmt.Errorf("%s %s: %v", flag, path, pathErr(err))
	case !st.IsDir():
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s: is a directory (want a file name)", flag, path)
	}
	return nil
}

func writeReportFile(flag, path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("%s %s: %v", flag, path, pathErr(err))
	}
	return nil
}

// pathErr is err without the operation and path an *fs.PathError adds,
// which the caller's message already names.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
