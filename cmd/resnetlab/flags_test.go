package main

import (
	"strings"
	"testing"
)

// A flag no command knows is named as it was typed, with the double dash
// the usage documents (not the flag package's "flag provided but not
// defined: -bogus"), in every command, a usage error (exit 2).
func TestUnknownFlagNamedAsTyped(t *testing.T) {
	for name := range commands {
		args := []string{name}
		prog := "resnetlab " + name
		if name == "data" {
			args, prog = append(args, "fetch"), "resnetlab data fetch"
		}
		for _, typed := range []string{"--bogus", "-bogus", "--bogus=3"} {
			c, out, errb := testCLI()
			code := runCLI(c, append(args, typed, "x")...)
			want := prog + ": unknown flag " + strings.TrimSuffix(typed, "=3") + "\n" +
				"Run '" + prog + " --help' for usage.\n"
			if code != exitUsage || errb.String() != want || out.Len() != 0 {
				t.Errorf("%v %s: exit %d, stdout %q, stderr %q\nwant exit 2 and %q", args, typed, code, out, errb, want)
			}
		}
	}
}

// The flag package's other errors name the flag as typed too, and a
// number or boolean flag's bad value is said in words.
func TestFlagValueErrorsNamedAsTyped(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "results", "-o"}, "resnetlab report: flag -o needs a value\n"},
		{[]string{"report", "results", "--plot"}, "resnetlab report: flag --plot needs a value\n"},
		{[]string{"bench", "--steps", "x"}, `resnetlab bench: invalid value "x" for --steps: want a whole number` + "\n"},
		{[]string{"bench", "-steps=99999999999999999999"}, `resnetlab bench: invalid value "99999999999999999999" for -steps: out of range (want a whole number)` + "\n"},
		{[]string{"run", "--headless=maybe", "x.toml"}, `resnetlab run: invalid value "maybe" for --headless: want true or false` + "\n"},
		{[]string{"run", "--run=", "x.toml"}, `resnetlab run: invalid value "" for --run: empty name in ""` + "\n"},
	} {
		c, _, errb := testCLI()
		code := runCLI(c, tc.args...)
		first, _, _ := strings.Cut(errb.String(), "\n")
		if code != exitUsage || first+"\n" != tc.want {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and %q", tc.args, code, errb, tc.want)
		}
	}
}
