package ckpt

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Ref names one checkpoint of a directory: the end of epoch
// Epoch (Step 0: files model_E.pth, optimizer_E.pth, lr_scheduler_E.pth,
// the names ColossalAI's example uses), or Step steps into epoch Epoch, a
// checkpoint taken mid-epoch with the c key or on Ctrl-C (files
// model_E-stepS.pth and so on). The two have different names so that a
// mid-epoch save is never overwritten by the end of its epoch.
type Ref struct {
	Epoch, Step int
}

// String is the reference as --resume takes it: "E" or "E@S".
func (r Ref) String() string {
	if r.Step == 0 {
		return strconv.Itoa(r.Epoch)
	}
	return fmt.Sprintf("%d@%d", r.Epoch, r.Step)
}

// Describe is the reference in words, for messages.
func (r Ref) Describe() string {
	if r.Step == 0 {
		return fmt.Sprintf("epoch %d", r.Epoch)
	}
	return fmt.Sprintf("epoch %d step %d", r.Epoch, r.Step)
}

// IsZero reports a fresh start (no checkpoint).
func (r Ref) IsZero() bool { return r.Epoch == 0 && r.Step == 0 }

// Paths returns the three file names of the checkpoint in dir.
func (r Ref) Paths(dir string) (model, optim, sched string) {
	if r.Step == 0 {
		return Paths(dir, r.Epoch)
	}
	f := func(kind string) string {
		return filepath.Join(dir, fmt.Sprintf("%s_%d-step%d.pth", kind, r.Epoch, r.Step))
	}
	return f("model"), f("optimizer"), f("lr_scheduler")
}

// CompareRefs orders checkpoints by training position (for
// slices.SortFunc): epoch E's mid-epoch saves, by step, come before E's
// end.
func CompareRefs(a, b Ref) int {
	if c := cmp.Compare(a.Epoch, b.Epoch); c != 0 {
		return c
	}
	return cmp.Compare(a.pos(), b.pos())
}

func (r Ref) pos() int {
	if r.Step == 0 {
		return math.MaxInt
	}
	return r.Step
}

// ParseRef reads "E" or "E@S" (E >= 1, S >= 1).
func ParseRef(s string) (Ref, error) {
	es, ss, mid := strings.Cut(strings.TrimSpace(s), "@")
	e, err := strconv.Atoi(es)
	if err != nil || e < 1 {
		return Ref{}, fmt.Errorf("%q: want an epoch E >= 1, or E@S for step S of epoch E", s)
	}
	if !mid {
		return Ref{Epoch: e}, nil
	}
	st, err := strconv.Atoi(ss)
	if err != nil || st < 1 {
		return Ref{}, fmt.Errorf("%q: the step after @ must be a number >= 1", s)
	}
	return Ref{Epoch: e, Step: st}, nil
}

var refFileRE = regexp.MustCompile(`^model_([0-9]+)(?:-step([0-9]+))?\.pth$`)

// ListRefs returns, in training order, every checkpoint of dir
// that has all three files: epoch ends and mid-epoch saves. A missing dir
// gives an error matching fs.ErrNotExist.
func ListRefs(dir string) ([]Ref, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	have := map[string]bool{}
	for _, e := range entries {
		if e.Type().IsRegular() {
			have[e.Name()] = true
		}
	}
	var refs []Ref
	for name := range have {
		r, ok := refOfModelFile(name)
		if !ok {
			continue
		}
		_, optim, sched := r.Paths("")
		if have[optim] && have[sched] {
			refs = append(refs, r)
		}
	}
	slices.SortFunc(refs, CompareRefs)
	return refs, nil
}

// refOfModelFile parses a model file name; "model_05.pth" is not ours.
func refOfModelFile(name string) (Ref, bool) {
	m := refFileRE.FindStringSubmatch(name)
	if m == nil {
		return Ref{}, false
	}
	var r Ref
	var err error
	if r.Epoch, err = strconv.Atoi(m[1]); err != nil || strconv.Itoa(r.Epoch) != m[1] {
		return Ref{}, false
	}
	if m[2] != "" {
		if r.Step, err = strconv.Atoi(m[2]); err != nil || strconv.Itoa(r.Step) != m[2] || r.Step == 0 {
			return Ref{}, false
		}
	}
	return r, true
}

// JoinRefs lists refs for messages: "1, 2@40, 2".
func JoinRefs(refs []Ref) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// Done is the position the run starts at: the epochs complete before it
// and the steps already done in the next one.
func (r Ref) Done() (epochs, steps int) {
	if r.Step > 0 {
		return r.Epoch - 1, r.Step
	}
	return r.Epoch, 0
}
