package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// newFlags makes a flag set that reports errors to us instead of printing.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseArgs parses flags that may come before or after positional
// arguments ("run spec.toml --headless" works like "run --headless
// spec.toml"); everything after "--" is positional. It returns the
// positional arguments. On --help it prints usage and returns done with
// exitOK; on a bad flag it prints the error and returns done with exitUsage.
func (c *cli) parseArgs(fs *flag.FlagSet, usage string, args []string) (pos []string, done bool, code int) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.stdout, usage)
			return nil, true, exitOK
		}
		if err != nil {
			return nil, true, c.usageError(fs.Name(), flagError(fs, args, err))
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), false, exitOK
		}
		if len(rest) == 0 {
			return pos, false, exitOK
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError is the flag package's parse error err, got while parsing
// args, with the flag named as the command line spelled it (--bogus, not
// the package's -bogus: the usage documents double-dash flags) and a
// number flag's bad value said in words.
func flagError(fs *flag.FlagSet, args []string, err error) string {
	msg := err.Error()
	typed := func(name string) string { return typedFlag(args[:len(args)-len(fs.Args())], name) }
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag " + typed(name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("flag %s needs a value", typed(name))
	}
	for _, prefix := range []string{"invalid value ", "invalid boolean value "} {
		rest, ok := strings.CutPrefix(msg, prefix)
		if !ok {
			continue
		}
		// rest is `"VALUE" for [flag ]-NAME: ERR`, VALUE quoted by %q.
		value, tail, ok := cutQuoted(rest)
		if !ok {
			break
		}
		tail, ok = strings.CutPrefix(tail, " for ")
		if !ok {
			break
		}
		tail = strings.TrimPrefix(tail, "flag ")
		name, why, ok := strings.Cut(strings.TrimPrefix(tail, "-"), ": ")
		if !ok || fs.Lookup(name) == nil {
			break
		}
		if strings.HasPrefix(why, value+": ") { // the flag's own error names the value
			return typed(name) + " " + why
		}
		return fmt.Sprintf("invalid value %s for %s: %s", value, typed(name), valueWant(fs.Lookup(name), why))
	}
	return msg
}

// cutQuoted splits s, which starts with a Go-quoted string, after that string.
func cutQuoted(s string) (quoted, rest string, ok bool) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return s[:i+1], s[i+1:], true
		}
	}
	return "", s, false
}

// typedFlag is flag name as args, the arguments parsed up to the bad one,
// last spelled it: "--name" or "-name" (without an "=value").
func typedFlag(args []string, name string) string {
	for i := len(args) - 1; i >= 0; i-- {
		a, _, _ := strings.Cut(args[i], "=")
		if a == "-"+name || a == "--"+name {
			return a
		}
	}
	return "--" + name
}

// valueWant words the flag package's error for a bad value of f: what
// its parsers of numbers and booleans say ("parse error") names what
// the flag wants; other flags' own errors stay as they are.
func valueWant(f *flag.Flag, why string) string {
	if why != "parse error" && why != "value out of range" {
		return why
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return why
	}
	want := ""
	switch g.Get().(type) {
	case bool:
		want = "true or false"
	case int, int64:
		want = "a whole number"
	case uint, uint64:
		want = "a whole number >= 0"
	case float64:
		want = "a number"
	case time.Duration:
		want = "a duration such as 90s or 5m"
	default:
		return why
	}
	if why == "value out of range" {
		return "out of range (want " + want + ")"
	}
	return "want " + want
}

// flagGiven reports whether the command line set the flag name, so that a
// default can differ from the same value typed.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// usageError prints a usage problem and returns exitUsage.
func (c *cli) usageError(cmd, msg string) int {
	fmt.Fprintf(c.stderr, "resnetlab %s: %s\nRun 'resnetlab %s --help' for usage.\n", cmd, msg, cmd)
	return exitUsage
}
