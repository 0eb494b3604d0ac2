package spec

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
)

// schemaKeys lists the keys each table accepts ("" is the top level),
// taken from the raw structs' tags so the two cannot drift apart.
var schemaKeys = map[string][]string{
	"":          tagNames(rawSpec{}),
	"synthetic": tagNames(rawSynthetic{}),
	"grid":      tagNames(rawGrid{}),
	"run":       tagNames(rawRun{}),
	"zero":      tagNames(rawZero{}),
	"fp16":      tagNames(rawFP16{}),
	"gemini":    tagNames(rawGemini{}),
}

func tagNames(v any) []string {
	t := reflect.TypeOf(v)
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = t.Field(i).Tag.Get("toml")
	}
	return names
}

// unknownKeys reports keys the schema does not know: those the TOML decoder
// left undecoded, and those it matched only case-insensitively (the decoder
// accepts "Epochs" for epochs; we do not, to keep specs unambiguous).
func (d *decoder) unknownKeys() {
	seen := map[string]bool{}
	for _, k := range d.md.Undecoded() {
		d.unknownKey(k, seen)
	}
	for _, k := range d.md.Keys() {
		if len(k) <= 2 && !knownExactly(k) && d.knownFold(k) {
			d.unknownKey(k, seen)
		}
	}
}

func knownExactly(k []string) bool {
	table := ""
	if len(k) == 2 {
		table = k[0]
	}
	keys, ok := schemaKeys[table]
	return ok && contains(keys, k[len(k)-1])
}

// knownFold reports whether k's table is in the schema (so the decoder
// matched k against a field, case-insensitively).
func (d *decoder) knownFold(k []string) bool {
	if len(k) == 1 {
		return true
	}
	_, ok := schemaKeys[k[0]]
	return ok && contains(schemaKeys[""], k[0])
}

func (d *decoder) unknownKey(k []string, seen map[string]bool) {
	path := strings.Join(k, ".")
	for i := 1; i < len(k); i++ { // report a bad table once, not each key in it
		prefix := strings.Join(k[:i], ".")
		if seen[prefix] || d.bad[prefix] {
			return
		}
	}
	if seen[path] {
		return
	}
	seen[path] = true
	hint := keyHint(k)
	for _, p := range d.locate(k) {
		d.errf(p, "unknown key (%s)", hint)
	}
}

// locate finds where an unknown key sits; keys of [[run]] tables are
// reported once per table that has them.
func (d *decoder) locate(k []string) []string {
	if len(k) < 2 || k[0] != "run" {
		return []string{strings.Join(k, ".")}
	}
	var out []string
	rest := strings.Join(k[1:], ".")
	for i := 1; d.idx.has(fmt.Sprintf("run[%d]", i)); i++ {
		if p := fmt.Sprintf("run[%d].%s", i, rest); d.idx.has(p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		out = []string{strings.Join(k, ".")}
	}
	return out
}

// keyHint says what the key might have been meant to be.
func keyHint(k []string) string {
	table, name := "", k[len(k)-1]
	if len(k) == 2 {
		table = k[0]
	}
	known, ok := schemaKeys[table]
	if len(k) > 2 || !ok {
		return "this spec format has no such table or key"
	}
	if best := closest(name, known); best != "" {
		return fmt.Sprintf("did you mean `%s`?", joinPath(table, best))
	}
	for t, keys := range schemaKeys {
		if t != table && t != "" && contains(keys, name) {
			return fmt.Sprintf("`%s` belongs in the [%s] table", name, t)
		}
	}
	where := "at the top level"
	if table != "" {
		where = "in [" + table + "]"
	}
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	return fmt.Sprintf("known keys %s: %s", where, strings.Join(sorted, ", "))
}

// closest returns the known key equal to name ignoring case, or within
// edit distance 2, or "".
func closest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return k
		}
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var specNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// crossChecks are the checks that read several keys. Each runs only when
// every key it reads decoded cleanly (a key with an error keeps its
// default, which would make the check's verdict about a value the file
// does not hold), so that one pass reports every problem it can.
func (d *decoder) crossChecks(s *Spec) {
	erred := map[string]bool{}
	for _, e := range d.errs {
		erred[e.Key] = true
	}
	clean := func(keys ...string) bool {
		for _, k := range keys {
			if erred[k] {
				return false
			}
		}
		return true
	}
	if clean("name") && !specNameRE.MatchString(s.Name) {
		d.errf("name", "%q is not a valid name (want letters, digits, '.', '_' or '-': it names files)", s.Name)
	}
	if clean("dataset", "in_channels") && s.Dataset == "cifar10" && s.InChannels != 3 {
		d.errf(d.either("in_channels", "dataset"), "cifar10 has 3 channels (want in_channels = 3)")
	}
	if clean("resume", "epochs") && s.Resume > s.Epochs {
		d.errf("resume", "epoch %d is past the last epoch %d (want 0 to %d)", s.Resume, s.Epochs, s.Epochs)
	}
	if clean("dataset", "synthetic.train", "batch_size") && s.Dataset == "synthetic" && s.Synthetic.Train < s.BatchSize {
		d.errf(d.either("synthetic.train", "batch_size"),
			"%d training images is less than one batch of %d (want synthetic.train >= batch_size)",
			s.Synthetic.Train, s.BatchSize)
	}
	if clean("milestones") && !increasing(s.Milestones) {
		d.errf("milestones", "%v is not strictly increasing (want e.g. [20, 40, 60, 80])", s.Milestones)
	}
	if err := checkTemplate(s.Checkpoint); clean("checkpoint") && err != "" {
		d.errf("checkpoint", "%s", err)
	}
	if clean("comm", "device") && s.Device == "cpu" && GPUOnlyComm(s.Comm) {
		d.errf(d.either("comm", "device"), "%q needs GPU ranks, but device = \"cpu\" (want \"auto\" or \"host\")", s.Comm)
	}
	f := s.FP16
	if clean("fp16.min_scale", "fp16.max_scale") && f.MinScale != nil && f.MaxScale != nil && *f.MaxScale != 0 &&
		*f.MinScale > *f.MaxScale {
		d.errf("fp16.min_scale", "%v is above max_scale %v (want min_scale <= max_scale)", *f.MinScale, *f.MaxScale)
	}
}

func increasing(xs []int) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i] <= xs[i-1] {
			return false
		}
	}
	return true
}

// either returns the first path the file defines, else the last one.
func (d *decoder) either(paths ...string) string {
	for _, p := range paths {
		if d.idx.has(p) {
			return p
		}
	}
	return paths[len(paths)-1]
}

// GPUOnlyComm reports whether comm is a value only GPU ranks can use.
func GPUOnlyComm(comm string) bool { return comm == "device" || comm == "nccl" }
