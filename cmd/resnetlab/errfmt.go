package main

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"
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

// wrapText fits s to a terminal of width columns for reading: each of its
// lines is broken at spaces into lines of at most width columns, those
// after the first indented by indent. Nothing is cut: a word longer than a
// line stays whole on a line of its own (the terminal wraps it), and width
// 0 (not a terminal) leaves s as it is, one line per line.
func wrapText(s string, width int, indent string) string {
	if width <= 0 {
		return s
	}
	var out []string
	for _, line := range strings.Split(s, "\n") {
		lead := line[:len(line)-len(strings.TrimLeft(line, " \t"))] // a line's own indentation stays
		cur, curW := lead, ansi.StringWidth(lead)
		for i, word := range strings.Fields(line) {
			w := ansi.StringWidth(word)
			switch {
			case i == 0:
				cur, curW = cur+word, curW+w
			case curW+1+w <= width:
				cur, curW = cur+" "+word, curW+1+w
			default:
				out = append(out, cur)
				cur, curW = indent+word, ansi.StringWidth(indent)+w
			}
		}
		out = append(out, cur)
	}
	return strings.Join(out, "\n")
}
