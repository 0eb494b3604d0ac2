package comm

import (
	"net"
	"strings"
	"testing"
)

func TestParseEnv(t *testing.T) {
	full := map[string]string{"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "node1", "MASTER_PORT": "29500"}
	with := func(k, v string) map[string]string { return withEnv(full, k, v) }
	parse := func(m map[string]string) (Env, bool, error) { return parseEnv(lookupIn(m)) }
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
