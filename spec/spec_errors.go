package spec

import (
	"errors"
	"fmt"
	"sort"
)

// Error is one problem found in a spec file. Its message reads
// "FILE:LINE: key `KEY`: MSG", MSG saying what is wrong and, in parentheses,
// what was expected.
type Error struct {
	File string
	Line int
	Key  string // dotted path, "run[2].plugin" for the 2nd [[run]]; "" if none
	Msg  string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: key `%s`: %s", e.File, e.Line, e.Key, e.Msg)
}

// joinSpecErrors orders errors by line so a user can fix them top-down;
// the result prints one error per line.
func joinSpecErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}
