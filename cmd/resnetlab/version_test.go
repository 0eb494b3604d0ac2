package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// version (and --version) names the build: the module version, the commit
// where the version does not already carry it, uncommitted changes, Go.
func TestVersionLine(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"resnetlab (devel), go1.26.8 (no commit recorded: built outside a git checkout or with -buildvcs=false)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "48f118b37503aa", "vcs.time", "2026-12-08T01:00:00Z", "vcs.modified", "true")},
			"resnetlab (devel) commit 48f118b37503 (2026-12-08T01:00:00Z) with uncommitted changes, go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261208010000-48f118b37503+dirty"},
			Settings: vcs("vcs.revision", "48f118b37503aa", "vcs.modified", "true")},
			"resnetlab v0.0.0-20261208010000-48f118b37503+dirty, go1.26.8"},
	} {
		if got := versionLine(c.bi, true); got != c.want {
			t.Errorf("versionLine = %q, want %q", got, c.want)
		}
	}
	if got := versionLine(nil, false); got != "resnetlab (no build information)" {
		t.Errorf("without build info: %q", got)
	}
	for _, arg := range []string{"version", "--version"} {
		c, out, errb := testCLI()
		if code := runCLI(c, arg); code != exitOK || !strings.HasPrefix(out.String(), "resnetlab ") || errb.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, out, errb)
		}
	}
	// A command like the others: its help, and no arguments.
	for _, args := range [][]string{{"help", "version"}, {"version", "--help"}} {
		c, out, _ := testCLI()
		if code := runCLI(c, args...); code != exitOK || !strings.HasPrefix(out.String(), "Usage: resnetlab version") {
			t.Errorf("%v: exit %d, stdout %q", args, code, out)
		}
	}
	c, _, errb := testCLI()
	if code := runCLI(c, "version", "extra"); code != exitUsage || !strings.Contains(errb.String(), `unexpected argument "extra"`) {
		t.Errorf("version extra: exit %d, stderr %q", code, errb)
	}
}
