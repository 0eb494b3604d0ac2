package comm

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseEnv(t *testing.T) {
	full := map[string]string{"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "node1", "MASTER_PORT": "29500"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range full {
			m[kk] = vv
		}
		if v == "<unset>" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	parse := func(m map[string]string) (Env, bool, error) {
		return parseEnv(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	}
	e, ok, err := parse(full)
	if err != nil || !ok || e != (Env{Rank: 2, LocalRank: 0, WorldSize: 4, MasterAddr: "node1", MasterPort: 29500}) {
		t.Fatalf("full env: %+v %v %v", e, ok, err)
	}
	if e, ok, err := parse(map[string]string{}); err != nil || ok || e.WorldSize != 1 {
		t.Fatalf("empty env: %+v %v %v", e, ok, err)
	}
	bad := map[string]map[string]string{
		"LOCAL_RANK, MASTER_ADDR missing": with("LOCAL_RANK", "<unset>"),
		`RANK="x"`:                        with("RANK", "x"),
		`RANK="4"`:                        with("RANK", "4"),
		`WORLD_SIZE="0"`:                  with("WORLD_SIZE", "0"),
		`MASTER_PORT="70000"`:             with("MASTER_PORT", "70000"),
		`LOCAL_RANK="-1"`:                 with("LOCAL_RANK", "-1"),
		`MASTER_ADDR=""`:                  with("MASTER_ADDR", " "),
	}
	delete(bad["LOCAL_RANK, MASTER_ADDR missing"], "MASTER_ADDR")
	for want, m := range bad {
		if _, _, err := parse(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("env %v: error %v, want it to mention %s", m, err, want)
		}
	}
}

func TestEnvFromLaunch(t *testing.T) {
	for k, v := range map[string]string{"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1234"} {
		t.Setenv(k, v)
	}
	e, ok, err := EnvFromLaunch()
	if err != nil || !ok || e.Rank != 1 || e.MasterPort != 1234 {
		t.Fatalf("%+v %v %v", e, ok, err)
	}
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// exchange runs ExchangeID for the given ranks (as goroutines), the master
// after a delay so that the others must retry.
func exchange(t *testing.T, ctx context.Context, envs []Env, id []byte) ([][]byte, []error) {
	out := make([][]byte, len(envs))
	errs := make([]error, len(envs))
	var wg sync.WaitGroup
	for i, e := range envs {
		wg.Go(func() {
			if e.Rank == 0 {
				time.Sleep(50 * time.Millisecond)
			}
			out[i], errs[i] = ExchangeID(ctx, e, id)
		})
	}
	wg.Wait()
	return out, errs
}

func envs(port int, world int, ranks ...int) []Env {
	var es []Env
	for _, r := range ranks {
		es = append(es, Env{Rank: r, LocalRank: r, WorldSize: world, MasterAddr: "127.0.0.1", MasterPort: port})
	}
	return es
}

func TestExchangeID(t *testing.T) {
	id := bytes.Repeat([]byte{1, 2, 3, 4}, 32) // 128 bytes like an NCCL id
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, errs := exchange(t, ctx, envs(freePort(t), 3, 0, 1, 2), id)
	for r := range out {
		if errs[r] != nil || !bytes.Equal(out[r], id) {
			t.Fatalf("rank %d: %x, %v", r, out[r], errs[r])
		}
	}
	if got, err := ExchangeID(ctx, Env{WorldSize: 1}, id); err != nil || !bytes.Equal(got, id) {
		t.Fatalf("world 1: %x %v", got, err)
	}
}

func TestExchangeIDFailures(t *testing.T) {
	id := []byte("id")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	// Rank 2 never comes: rank 0 times out and tells rank 1 why.
	es := envs(freePort(t), 3, 0, 1)
	long, cancelLong := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelLong()
	var err1 error
	done := make(chan struct{})
	go func() { _, err1 = ExchangeID(long, es[1], nil); close(done) }()
	_, err0 := ExchangeID(ctx, es[0], id)
	<-done
	if err0 == nil || !strings.Contains(err0.Error(), "1 more of 3 ranks") {
		t.Errorf("master without rank 2: %v", err0)
	}
	if err1 == nil || !strings.Contains(err1.Error(), "refused rank 1") || !strings.Contains(err1.Error(), "1 more of 3") {
		t.Errorf("rank 1 without rank 2: %v", err1)
	}
	// No master at all.
	_, errs := exchange(t, ctx, envs(freePort(t), 2, 1), id)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "cannot reach rank 0") {
		t.Errorf("rank 1 without a master: %v", errs[0])
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeouts took %v", d)
	}
	// Disagreeing world sizes fail on both sides.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	port := freePort(t)
	es = append(envs(port, 2, 0), envs(port, 3, 2)...)
	_, errs = exchange(t, ctx2, es, id)
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "WORLD_SIZE=3, rank 0 has 2") {
			t.Errorf("process %d with mismatched world sizes: %v", i, err)
		}
	}
}
