package spec

import "fmt"

// maxSpecDepth bounds the nesting of arrays and inline tables in a spec.
// No valid spec nests more than a few levels, and the TOML library's
// memory grows quadratically with depth, so a deep input is refused
// before it is decoded.
const maxSpecDepth = 32

// checkSpecDepth refuses a source over maxSpecBytes, then scans src for '[' and '{' nesting outside strings and
// comments and names the line where it passes maxSpecDepth.
func checkSpecDepth(file string, src []byte) error {
	if len(src) > maxSpecBytes {
		return &Error{File: file, Line: 1, Msg: fmt.Sprintf("%d bytes, over the %d a spec may have", len(src), maxSpecBytes)}
	}
	depth, line := 0, 1
	var quote byte // the open string's quote character, or 0
	comment := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			line, comment = line+1, false
			if quote == '\'' || quote == '"' { // a multi-line string keeps going
				continue
			}
		case comment:
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			comment = true
		case c == '[' || c == '{':
			if depth++; depth > maxSpecDepth {
				return &Error{File: file, Line: line,
					Msg: fmt.Sprintf("arrays and tables nested more than %d deep (a spec needs a few levels)", maxSpecDepth)}
			}
		case c == ']' || c == '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
