package cuda

import (
	"strings"
	"testing"
)

// A PTX set without one of the kernels the backend always uses must be
// reported by name at New, not panic at the first launch.
func TestRequireNamesMissingKernel(t *testing.T) {
	m := &modules{funcs: map[string]uintptr{"adam_copy": 1}, names: []string{"old/ops.ptx"}}
	if err := m.require([]string{"adam_copy"}); err != nil {
		t.Fatalf("present kernel: %v", err)
	}
	err := m.require([]string{"adam_copy", "bn_act_bwd"})
	if err == nil || !strings.Contains(err.Error(), `"bn_act_bwd"`) || !strings.Contains(err.Error(), "old/ops.ptx") {
		t.Fatalf("missing kernel: got %v, want an error naming bn_act_bwd and old/ops.ptx", err)
	}
}
