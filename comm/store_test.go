package comm

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func testStore(t *testing.T) (*StoreServer, func() *StoreClient) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := ServeStore(ln)
	t.Cleanup(func() { s.Close() })
	return s, func() *StoreClient {
		c, err := DialStore(context.Background(), s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// TestStore: Get waits for a Set from another client, Add is atomic
// across clients, Wait and Check see every key, and a Get of a key
// nobody sets times out with ErrStoreTimeout, leaving the client usable.
func TestStore(t *testing.T) {
	s, dial := testStore(t)
	a, b := dial(), dial()
	got := make(chan []byte)
	go func() {
		v, err := b.Get("k", 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	time.Sleep(20 * time.Millisecond)
	if err := a.Set("k", []byte("v1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if v := <-got; string(v) != "v1" {
		t.Fatalf("Get: %q", v)
	}
	var wg sync.WaitGroup
	for range 4 {
		c := dial()
		wg.Go(func() {
			for range 50 {
				if _, err := c.Add("n", 2, time.Second); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n, err := a.Add("n", 0, time.Second); err != nil || n != 400 {
		t.Fatalf("Add: %d %v, want 400", n, err)
	}
	if _, err := a.Add("k", 1, time.Second); err == nil || !strings.Contains(err.Error(), "not a counter") {
		t.Errorf("Add to a non-counter: %v", err)
	}
	if ok, err := a.Check([]string{"k", "n"}, time.Second); !ok || err != nil {
		t.Errorf("Check of set keys: %v %v", ok, err)
	}
	if ok, err := a.Check([]string{"k", "nope"}, time.Second); ok || err != nil {
		t.Errorf("Check of a missing key: %v %v", ok, err)
	}
	if err := a.Wait([]string{"k", "n"}, time.Second); err != nil {
		t.Error(err)
	}
	start := time.Now()
	if _, err := a.Get("nope", 100*time.Millisecond); !errors.Is(err, ErrStoreTimeout) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Get of an unset key: %v", err)
	}
	if err := a.Wait([]string{"k", "nope"}, 100*time.Millisecond); !errors.Is(err, ErrStoreTimeout) {
		t.Errorf("Wait for an unset key: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("two 100 ms timeouts took %v", d)
	}
	if v, err := a.Get("k", time.Second); err != nil || string(v) != "v1" {
		t.Errorf("the client after a timeout: %q %v", v, err)
	}
	if s.Touched("n").IsZero() || !s.Touched("never").IsZero() {
		t.Error("Touched")
	}
}

// TestStoreRefusesBadInput: an oversized value or key is refused by the
// client; a server that goes away ends a waiting Get at once.
func TestStoreRefusesBadInput(t *testing.T) {
	s, dial := testStore(t)
	c := dial()
	if err := c.Set("big", make([]byte, maxStoreValue+1), time.Second); err == nil || !strings.Contains(err.Error(), "limits") {
		t.Errorf("oversized value: %v", err)
	}
	if err := c.Set(strings.Repeat("k", maxStoreKey+1), nil, time.Second); err == nil || !strings.Contains(err.Error(), "key of") {
		t.Errorf("oversized key: %v", err)
	}
	// A raw request announcing a huge value is refused by the server.
	raw, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte{stSet, 0, 0, 0, 1, 0, 1, 0, 1, 'k', 0xff, 0xff, 0xff, 0xff})
	raw.SetDeadline(time.Now().Add(2 * time.Second))
	if status, msg, err := readReply(raw); err != nil || status != storeErr || !strings.Contains(string(msg), "value of") {
		t.Errorf("huge announced value: %d %q %v", status, msg, err)
	}
	done := make(chan error)
	go func() { _, err := c.Get("never", time.Minute); done <- err }()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Get succeeded after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get still waiting 5 s after the server closed")
	}
}
