package spec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseSpec: any input either parses into a spec whose grid expands,
// or fails with *Error values; it never panics.
func FuzzParseSpec(f *testing.F) {
	for _, c := range specErrCases {
		f.Add([]byte(c.src))
	}
	f.Add([]byte(fullSpec))
	files, _ := filepath.Glob("../experiments/*.toml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := ParseWithEnv("f.toml", src, noEnv)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || s != nil {
				t.Fatalf("error %v is not a *Error (spec %v)", err, s)
			}
			return
		}
		s.Cells()
		s.CheckDevices(1)
	})
}
