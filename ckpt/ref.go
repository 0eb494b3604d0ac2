package runner

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

// CheckpointRef names one checkpoint of a directory: the end of epoch
// Epoch (Step 0: files model_E.pth, optimizer_E.pth, lr_scheduler_E.pth,
// the names ColossalAI's example uses), or Step steps into epoch Epoch, a
// checkpoint taken mid-epoch with the c key or on Ctrl-C (files
// model_E-stepS.pth and so on). The two have different names so that a
// mid-epoch save is never overwritten by the end of its epoch.
type CheckpointRef struct {
	Epoch, Step int
}

// String is the reference as --resume takes it: "E" or "E@S".
func (r CheckpointRef) String() string {
	if r.Step == 0 {
		return strconv.Itoa(r.Epoch)
	}
	return fmt.Sprintf("%d@%d", r.Epoch, r.Step)
}

// Describe is the reference in words, for messages.
func (r CheckpointRef) Describe() string {
	if r.Step == 0 {
		return fmt.Sprintf("epoch %d", r.Epoch)
	}
	return fmt.Sprintf("epoch %d step %d", r.Epoch, r.Step)
}

// IsZero reports a fresh start (no checkpoint).
func (r CheckpointRef) IsZero() bool { return r.Epoch == 0 && r.Step == 0 }

// Paths returns the three file names of the checkpoint in dir.
func (r CheckpointRef) Paths(dir string) (model, optim, sched string) {
	if r.Step == 0 {
		return CheckpointPaths(dir, r.Epoch)
	}
	f := func(kind string) string {
		return filepath.Join(dir, fmt.Sprintf("%s_%d-step%d.pth", kind, r.Epoch, r.Step))
	}
	return f("model"), f("optimizer"), f("lr_scheduler")
}

// CompareCheckpointRefs orders checkpoints by training position (for
// slices.SortFunc): epoch E's mid-epoch saves, by step, come before E's
// end.
func CompareCheckpointRefs(a, b CheckpointRef) int {
	if c := cmp.Compare(a.Epoch, b.Epoch); c != 0 {
		return c
	}
	return cmp.Compare(a.pos(), b.pos())
}

func (r CheckpointRef) pos() int {
	if r.Step == 0 {
		return math.MaxInt
	}
	return r.Step
}

// ParseCheckpointRef reads "E" or "E@S" (E >= 1, S >= 1).
func ParseCheckpointRef(s string) (CheckpointRef, error) {
	es, ss, mid := strings.Cut(strings.TrimSpace(s), "@")
	e, err := strconv.Atoi(es)
	if err != nil || e < 1 {
		return CheckpointRef{}, fmt.Errorf("%q: want an epoch E >= 1, or E@S for step S of epoch E", s)
	}
	if !mid {
		return CheckpointRef{Epoch: e}, nil
	}
	st, err := strconv.Atoi(ss)
	if err != nil || st < 1 {
		return CheckpointRef{}, fmt.Errorf("%q: the step after @ must be a number >= 1", s)
	}
	return CheckpointRef{Epoch: e, Step: st}, nil
}

var refFileRE = regexp.MustCompile(`^model_([0-9]+)(?:-step([0-9]+))?\.pth$`)

// ListCheckpointRefs returns, in training order, every checkpoint of dir
// that has all three files: epoch ends and mid-epoch saves. A missing dir
// gives an error matching fs.ErrNotExist.
func ListCheckpointRefs(dir string) ([]CheckpointRef, error) {
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
	var refs []CheckpointRef
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
	slices.SortFunc(refs, CompareCheckpointRefs)
	return refs, nil
}

// refOfModelFile parses a model file name; "model_05.pth" is not ours.
func refOfModelFile(name string) (CheckpointRef, bool) {
	m := refFileRE.FindStringSubmatch(name)
	if m == nil {
		return CheckpointRef{}, false
	}
	var r CheckpointRef
	var err error
	if r.Epoch, err = strconv.Atoi(m[1]); err != nil || strconv.Itoa(r.Epoch) != m[1] {
		return CheckpointRef{}, false
	}
	if m[2] != "" {
		if r.Step, err = strconv.Atoi(m[2]); err != nil || strconv.Itoa(r.Step) != m[2] || r.Step == 0 {
			return CheckpointRef{}, false
		}
	}
	return r, true
}

// joinRefs lists refs for messages: "1, 2@40, 2".
func joinRefs(refs []CheckpointRef) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// From is the checkpoint the run started from (zero: a fresh start).
func (e RunStarted) From() CheckpointRef {
	return CheckpointRef{Epoch: e.StartEpoch, Step: e.StartStep}
}

// Done is the position the run starts at: the epochs complete before it
// and the steps already done in the next one.
func (r CheckpointRef) Done() (epochs, steps int) {
	if r.Step > 0 {
		return r.Epoch - 1, r.Step
	}
	return r.Epoch, 0
}

// Ref is the checkpoint a CheckpointSaved names.
func (e CheckpointSaved) Ref() CheckpointRef { return CheckpointRef{Epoch: e.Epoch, Step: e.Step} }
