package comm

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestReports: a rank's latest report reaches rank 0's store (the older
// ones coalesced), a flush writes it before returning, and a report over
// MaxReport is refused on both sides, naming the rank.
func TestReports(t *testing.T) {
	pcs, errs := joinAll(t, 2, fps(2, "same"), 10*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if b, err := pcs[0].Reported(1); b != nil || err != nil {
		t.Fatalf("before any report: %q %v", b, err)
	}
	for i := range 50 { // far faster than reportGap: only the latest must arrive
		if err := pcs[1].Report([]byte{byte(i), 1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pcs[1].FlushReport(time.Second); err != nil {
		t.Fatal(err)
	}
	if b, err := pcs[0].Reported(1); err != nil || !bytes.Equal(b, []byte{49, 1, 2}) {
		t.Fatalf("rank 0 read %v, %v: want the last report [49 1 2]", b, err)
	}
	if err := pcs[1].Report(make([]byte, MaxReport+1)); err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("an oversized report: %v", err)
	}
	// A rank that writes the key itself (another binary, a corrupt peer)
	// gets no further than the size check.
	if err := pcs[1].Store().Set(reportKey(1), make([]byte, 1<<20), time.Second); err != nil {
		t.Fatal(err)
	}
	if b, err := pcs[0].Reported(1); b != nil || err == nil || !strings.Contains(err.Error(), "rank 1 sent a report of 1048576 bytes") {
		t.Errorf("an oversized stored report: %d bytes, %v", len(b), err)
	}
	if _, err := pcs[1].Reported(0); err == nil {
		t.Error("rank 1 read rank 0's reports")
	}
	if err := pcs[0].Report([]byte{1}); err != nil { // rank 0 keeps its own
		t.Error(err)
	}
}
