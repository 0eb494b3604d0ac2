package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
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
			return nil, true, c.usageError(fs.Name(), err.Error())
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
