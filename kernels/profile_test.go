package kernels

import (
	"bytes"
	"strings"
	"testing"
)

func rec(op, key string, ms float64, l, c, s int64) OpRecord {
	return OpRecord{Op: op, Key: key, MS: ms, Counters: Counters{l, c, s}}
}

func TestAggregateSumsAndSorts(t *testing.T) {
	recs := []OpRecord{
		rec("Conv2dForward", "a", 0.010, 1, 0, 0),
		rec("ReLUForward", "a", 0.004, 1, 0, 0),
		rec("Conv2dForward", "b", 0.030, 2, 0, 0),
		rec("Download", "c", 0.001, 0, 1, 1),
		rec("Conv2dForward", "a", 0.012, 1, 0, 0),
	}
	byOp := Aggregate(recs, false)
	if len(byOp) != 3 || byOp[0].Op != "Conv2dForward" || byOp[0].Calls != 3 || byOp[0].Launches != 4 || byOp[0].Key != "" {
		t.Fatalf("by op: %+v", byOp)
	}
	if d := byOp[0].MS - 0.052; d > 1e-12 || d < -1e-12 {
		t.Errorf("conv time %g, want 0.052", byOp[0].MS)
	}
	if byOp[2].Op != "Download" || byOp[2].Syncs != 1 || byOp[2].Copies != 1 {
		t.Errorf("download row %+v", byOp[2])
	}
	byKey := Aggregate(recs, true)
	if len(byKey) != 4 || byKey[0].Key != "b" || byKey[1].Key != "a" || byKey[1].Calls != 2 {
		t.Fatalf("by key: %+v", byKey)
	}
	for i := 1; i < len(byKey); i++ {
		if byKey[i].MS > byKey[i-1].MS {
			t.Fatalf("not sorted by time: %+v", byKey)
		}
	}
}

func TestWriteProfilePerStep(t *testing.T) {
	stats := Aggregate([]OpRecord{
		rec("AdamStep", "62 tensors", 0.2, 2, 0, 0),
		rec("Copy", "x", 0.1, 1, 0, 0),
		rec("Copy", "x", 0.1, 1, 0, 0),
	}, true)
	var buf bytes.Buffer
	WriteProfile(&buf, "fp16 by layer", stats, 2, 1)
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// title, header, one row (limit 1), "... 1 more rows", total
	if len(lines) != 5 || !strings.Contains(lines[0], "2 steps") || !strings.Contains(lines[3], "1 more") {
		t.Fatalf("table:\n%s", out)
	}
	// 0.2 ms over 2 steps = 100 us per step and 50% of the total; the total
	// row counts the cut row too: 0.4 ms / 2 = 200 us, 4 launches / 2 = 2.
	if f := strings.Fields(lines[2]); f[0] != "100.0" || f[1] != "50.0%" || f[3] != "1.0" {
		t.Errorf("adam row %q", lines[2])
	}
	if f := strings.Fields(lines[4]); f[0] != "200.0" || f[2] != "1.5" || f[3] != "2.0" || f[len(f)-1] != "total" {
		t.Errorf("total row %q", lines[4])
	}
}

func TestShapeKeyAndCounters(t *testing.T) {
	a := &Tensor{Shape: []int{100, 64, 8, 8}, DType: F16}
	w := &Tensor{Shape: []int{128, 64, 3, 3}, DType: F32}
	if got := ShapeKey(a, nil, w); got != "fp16[100 64 8 8] fp32[128 64 3 3]" {
		t.Errorf("ShapeKey = %q", got)
	}
	d := Counters{10, 5, 3}.Sub(Counters{4, 1, 1})
	if d != (Counters{6, 4, 2}) {
		t.Errorf("Sub = %+v", d)
	}
}
