package comm

import (
	"strings"
	"testing"
)

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// withEnv is a copy of base with k set to v, or without k when v is
// "<unset>".
func withEnv(base map[string]string, k, v string) map[string]string {
	m := map[string]string{}
	for kk, vv := range base {
		m[kk] = vv
	}
	if v == "<unset>" {
		delete(m, k)
	} else {
		m[k] = v
	}
	return m
}

func TestFirstHost(t *testing.T) {
	for list, want := range map[string]string{
		"node1": "node1", "gpu[07-09,12],login1": "gpu07", "a1,b[1-2]": "a1", "n[3]": "n3", "x[010,2]": "x010",
	} {
		if got, err := firstHost(list); err != nil || got != want {
			t.Errorf("firstHost(%q) = %q, %v, want %q", list, got, err, want)
		}
	}
	for _, list := range []string{"", "[1-2]", "n[a]", "n[1-2"} {
		if _, err := firstHost(list); err == nil || !strings.Contains(err.Error(), "SLURM_JOB_NODELIST") {
			t.Errorf("firstHost(%q): %v, want an error naming SLURM_JOB_NODELIST", list, err)
		}
	}
}

func TestParseSlurm(t *testing.T) {
	base := map[string]string{"SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NTASKS": "4",
		"SLURM_JOB_NODELIST": "gpu[07-08]", "MASTER_PORT": "29500"}
	e, ok, err := parseSlurm(lookupIn(base))
	if err != nil || !ok || e.Rank != 3 || e.LocalRank != 1 || e.WorldSize != 4 || e.MasterAddr != "gpu07" || e.MasterPort != 29500 {
		t.Fatalf("%+v %v %v", e, ok, err)
	}
	with := func(k, v string) map[string]string { return withEnv(base, k, v) }
	if e, _, err := parseSlurm(lookupIn(with("MASTER_ADDR", "head"))); err != nil || e.MasterAddr != "head" {
		t.Errorf("MASTER_ADDR set: %+v %v", e, err)
	}
	if _, ok, err := parseSlurm(lookupIn(with("SLURM_NTASKS", "1"))); ok || err != nil {
		t.Errorf("one task: %v %v, want a plain run", ok, err)
	}
	for want, m := range map[string]map[string]string{
		"SLURM_LOCALID missing":  with("SLURM_LOCALID", "<unset>"),
		"MASTER_PORT is missing": with("MASTER_PORT", "<unset>"),
		`SLURM_PROCID="9"`:       with("SLURM_PROCID", "9"),
		`SLURM_NTASKS="x"`:       with("SLURM_NTASKS", "x"),
	} {
		if _, _, err := parseSlurm(lookupIn(m)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want it to mention %s", m, err, want)
		}
	}
}

func TestParseEnvGroup(t *testing.T) {
	m := map[string]string{"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "a", "MASTER_PORT": "1",
		"LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"}
	if e, ok, err := parseEnv(lookupIn(m)); err != nil || !ok || e.LocalWorldSize != 2 || e.GroupRank != 1 {
		t.Fatalf("%+v %v %v", e, ok, err)
	}
	m["GROUP_RANK"] = "0"
	if _, _, err := parseEnv(lookupIn(m)); err == nil || !strings.Contains(err.Error(), "RANK=3 conflicts with GROUP_RANK=0") {
		t.Errorf("conflict: %v", err)
	}
	m["GROUP_RANK"], m["LOCAL_WORLD_SIZE"] = "1", "1"
	if _, _, err := parseEnv(lookupIn(m)); err == nil || !strings.Contains(err.Error(), `LOCAL_WORLD_SIZE="1"`) {
		t.Errorf("LOCAL_RANK >= LOCAL_WORLD_SIZE: %v", err)
	}
}
