package main

import (
	"fmt"
	"strings"
)

// maxErrLines bounds the lines of one error printed to the terminal: a
// loader that lists every mismatched key can say a hundred lines, printed
// once per run and again at the end. The whole text stays in the run's
// result file (its "error" field).
const maxErrLines = 10

// clipLines keeps the first n lines of s and says how many were left out.
func clipLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "\n") +
		fmt.Sprintf("\n... and %d more lines (the whole error is in the run's result file)", len(lines)-n)
}
