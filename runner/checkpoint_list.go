package runner

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
)

var modelFileRE = regexp.MustCompile(`^model_([0-9]+)\.pth$`)

// ListCheckpoints returns, in increasing order, the epochs that have all
// three checkpoint files in dir. A missing dir gives an error matching
// fs.ErrNotExist.
func ListCheckpoints(dir string) ([]int, error) {
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
	var epochs []int
	for name := range have {
		m := modelFileRE.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		e, err := strconv.Atoi(m[1])
		if err != nil || strconv.Itoa(e) != m[1] { // "model_05.pth" is not ours
			continue
		}
		_, optim, sched := CheckpointPaths("", e)
		if have[optim] && have[sched] {
			epochs = append(epochs, e)
		}
	}
	sort.Ints(epochs)
	return epochs, nil
}

// MetaInt reads an integer from checkpoint metadata (JSON numbers decode
// as float64).
func MetaInt(meta map[string]any, key string) (int, error) {
	v, ok := meta[key]
	if !ok {
		return 0, fmt.Errorf("metadata has no %q", key)
	}
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("metadata %q = %v (want an integer)", key, v)
	}
	return int(f), nil
}

// MetaString reads a string from checkpoint metadata.
func MetaString(meta map[string]any, key string) (string, error) {
	v, ok := meta[key]
	if !ok {
		return "", fmt.Errorf("metadata has no %q", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("metadata %q = %v (want a string)", key, v)
	}
	return s, nil
}
