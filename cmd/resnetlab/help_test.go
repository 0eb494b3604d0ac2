package main

import (
	"strings"
	"testing"
)

// help's own help is its usage, exit 0, like every other command's.
func TestHelpOfHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "help"}, {"help", "--help"}, {"help", "-h"}} {
		c, out, errb := testCLI()
		if code := runCLI(c, args...); code != exitOK || out.String() != helpUsage || errb.Len() != 0 {
			t.Errorf("%v: code %d, stdout %q, stderr %q", args, code, out, errb)
		}
	}
	if !strings.HasPrefix(helpUsage, "Usage: resnetlab help [COMMAND]\n") {
		t.Errorf("help usage: %q", helpUsage)
	}
	c, _, errb := testCLI()
	if code := runCLI(c, "help", "train"); code != exitUsage || !strings.Contains(errb.String(), "export, import, help or version)") {
		t.Errorf("help of an unknown command lists help among the commands: %d %q", code, errb)
	}
}
