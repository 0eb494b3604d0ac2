package runner

import (
	"slices"
	"testing"

	"resnetlab/spec"
)

// --run keeps the named runs of the grid, in the grid's order, whatever
// order it names them in; a name that is no run of the grid is refused,
// naming the flag, the value, the spec and the runs there are.
func TestRunsSelectsCells(t *testing.T) {
	s, err := spec.ParseWithEnv("g.toml", []byte("checkpoint = \"ck/{plugin}\"\n[grid]\nplugin = [\"torch_ddp\", \"low_level_zero\", \"gemini\"]\nprecision = [\"fp16\"]\n"),
		func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ids := func(cells []spec.Cell) []string {
		var out []string
		for _, c := range cells {
			out = append(out, c.ID)
		}
		return out
	}
	_, all, _, err := RunOptions{}.Apply(s)
	if err != nil || len(all) != 3 {
		t.Fatalf("cells %v, %v", ids(all), err)
	}
	_, some, _, err := RunOptions{Runs: []string{"gemini-fp16-1", "torch_ddp-fp16-1"}}.Apply(s)
	if want := []string{"torch_ddp-fp16-1", "gemini-fp16-1"}; err != nil || !slices.Equal(ids(some), want) {
		t.Errorf("--run gemini-fp16-1,torch_ddp-fp16-1: cells %v, %v; want %v", ids(some), err, want)
	}
	_, _, _, err = RunOptions{Runs: []string{"gemini-fp32-1"}}.Apply(s)
	want := `--run "gemini-fp32-1": g.toml has no run "gemini-fp32-1" (its runs: torch_ddp-fp16-1, low_level_zero-fp16-1, gemini-fp16-1)`
	if err == nil || err.Error() != want {
		t.Errorf("unknown run: %v\nwant %s", err, want)
	}
}
