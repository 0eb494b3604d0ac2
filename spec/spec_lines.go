package spec

import (
	"strconv"
	"strings"
)

// lineIndex maps each key of a TOML document to the line that defines it.
// BurntSushi/toml keeps key positions private, so semantic errors find their
// line by scanning the source: the document already parsed, so a simple
// line-oriented scan is enough. Paths are dotted; the n-th (1-based) table of
// an array of tables is written name[n], e.g. "run[2].plugin".
type lineIndex map[string]int

func indexLines(src string) lineIndex {
	idx := lineIndex{}
	table := ""
	aotCount := map[string]int{}
	for n, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "[["):
			name := headerName(line[2:], "]]")
			aotCount[name]++
			table = name + "[" + strconv.Itoa(aotCount[name]) + "]"
			idx.add(table, n+1)
		case strings.HasPrefix(line, "["):
			table = headerName(line[1:], "]")
			idx.add(table, n+1)
		default:
			if key, ok := lineKey(line); ok {
				idx.add(joinPath(table, key), n+1)
			}
		}
	}
	return idx
}

func (idx lineIndex) add(path string, line int) {
	if _, dup := idx[path]; !dup {
		idx[path] = line
	}
}

// line returns the line of path, else of its closest enclosing key or table
// (an inline table's keys are found at the line of the table's key), else 1.
func (idx lineIndex) line(path string) int {
	for path != "" {
		if n, ok := idx[path]; ok {
			return n
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 1
}

// has reports whether path itself appears in the source.
func (idx lineIndex) has(path string) bool {
	_, ok := idx[path]
	return ok
}

func joinPath(table, key string) string {
	if table == "" {
		return key
	}
	return table + "." + key
}

// headerName extracts "a.b" from "a . b ]  # comment", dropping quotes.
func headerName(rest, closing string) string {
	if i := strings.Index(rest, closing); i >= 0 {
		rest = rest[:i]
	}
	key, _ := parseDottedKey(rest)
	return key
}

// lineKey returns the dotted key of a "key = value" line.
func lineKey(line string) (string, bool) {
	if line == "" || line[0] == '#' {
		return "", false
	}
	key, rest := parseDottedKey(line)
	if key == "" || !strings.HasPrefix(strings.TrimSpace(rest), "=") {
		return "", false
	}
	return key, true
}

// parseDottedKey reads bare, "quoted" or 'literal' key segments joined by
// dots from the start of s; it returns the key and what follows it.
func parseDottedKey(s string) (key, rest string) {
	var segs []string
	for {
		s = strings.TrimLeft(s, " \t")
		seg, r, ok := parseKeySegment(s)
		if !ok {
			return "", s
		}
		segs = append(segs, seg)
		r = strings.TrimLeft(r, " \t")
		if !strings.HasPrefix(r, ".") {
			return strings.Join(segs, "."), r
		}
		s = r[1:]
	}
}

func parseKeySegment(s string) (seg, rest string, ok bool) {
	if s == "" {
		return "", s, false
	}
	if q := s[0]; q == '"' || q == '\'' {
		end := strings.IndexByte(s[1:], q)
		if end < 0 {
			return "", s, false
		}
		return s[1 : 1+end], s[2+end:], true
	}
	n := 0
	for n < len(s) && isBareKeyChar(s[n]) {
		n++
	}
	return s[:n], s[n:], n > 0
}

func isBareKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-'
}

// Where is "FILE:LINE" of key (a dotted path such as "checkpoint" or
// "gemini.device_budget") in the spec's source, for problems found after
// parsing (an unwritable directory, say); a key the file does not set gives
// "FILE" alone.
func (s *Spec) Where(key string) string {
	if !s.src.has(key) {
		return s.File
	}
	return s.where(key)
}
