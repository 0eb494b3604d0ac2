package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"resnetlab/report"
)

func (c *cli) cmdCompare(ctx context.Context, args []string) int {
	fs := newFlags("compare")
	pos, done, code := c.parseArgs(fs, compareUsage, args)
	if done {
		return code
	}
	if len(pos) == 0 {
		return c.usageError("compare", "want at least one result file or directory")
	}
	files, err := expandDirs(pos)
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab compare: %v\n", err)
		return exitFailed
	}
	results, err := report.ReadResults(files)
	if len(results) > 0 {
		fmt.Fprint(c.stdout, report.CompareTableWidth(results, c.width(c.stdout)))
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "resnetlab compare: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// expandDirs replaces each directory argument by the *.json files in it.
func expandDirs(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil || !st.IsDir() {
			files = append(files, a) // ReadResults reports missing files
			continue
		}
		matches, _ := filepath.Glob(filepath.Join(a, "*.json"))
		if len(matches) == 0 {
			return nil, fmt.Errorf("no *.json result files in %s", a)
		}
		files = append(files, matches...)
	}
	return files, nil
}
