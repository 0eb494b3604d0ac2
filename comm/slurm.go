package comm

import (
	"fmt"
	"strconv"
	"strings"
)

// slurmVars are what srun sets for every task; parseSlurm reads them when
// no torchrun variable is set.
var slurmVars = []string{"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_NODELIST"}

// parseSlurm makes an Env from srun's variables: RANK = SLURM_PROCID,
// LOCAL_RANK = SLURM_LOCALID, WORLD_SIZE = SLURM_NTASKS, MASTER_ADDR (when
// unset) the first host of SLURM_JOB_NODELIST, MASTER_PORT required. A
// one-task job (SLURM_NTASKS=1, or no SLURM_PROCID: a batch script
// itself) is a plain single-process run.
func parseSlurm(lookup func(string) (string, bool)) (Env, bool, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	if _, ok := lookup("SLURM_PROCID"); !ok {
		return Env{WorldSize: 1}, false, nil
	}
	if n := get("SLURM_NTASKS"); n == "1" {
		return Env{WorldSize: 1}, false, nil
	}
	for _, k := range slurmVars {
		if _, ok := lookup(k); !ok {
			return Env{}, false, fmt.Errorf("launch environment: SLURM_PROCID set but %s missing (srun sets all of %s)",
				k, strings.Join(slurmVars, ", "))
		}
	}
	vals := map[string]string{
		"RANK": get("SLURM_PROCID"), "LOCAL_RANK": get("SLURM_LOCALID"), "WORLD_SIZE": get("SLURM_NTASKS"),
		"MASTER_ADDR": get("MASTER_ADDR"), "MASTER_PORT": get("MASTER_PORT"),
	}
	names := map[string]string{"RANK": "SLURM_PROCID", "LOCAL_RANK": "SLURM_LOCALID", "WORLD_SIZE": "SLURM_NTASKS"}
	if _, ok := lookup("MASTER_PORT"); !ok {
		return Env{}, false, fmt.Errorf("launch environment: srun started this task (SLURM_PROCID=%s) but MASTER_PORT is missing (export MASTER_PORT=29500 in the job script)", vals["RANK"])
	}
	if _, ok := lookup("MASTER_ADDR"); !ok {
		host, err := firstHost(get("SLURM_JOB_NODELIST"))
		if err != nil {
			return Env{}, false, err
		}
		vals["MASTER_ADDR"] = host
	}
	e, ok, err := parseEnv(func(k string) (string, bool) { v, ok := vals[k]; return v, ok })
	if err != nil { // name srun's variable, not the torchrun name it stands for
		msg := err.Error()
		for t, s := range names {
			msg = strings.Replace(msg, " "+t+"=", " "+s+"=", 1)
		}
		return Env{}, false, fmt.Errorf("%s", msg)
	}
	return e, ok, nil
}

// firstHost is the first host of a Slurm node list such as
// "gpu[07-09,12],login1" (gpu07), keeping the range's zero padding.
func firstHost(list string) (string, error) {
	bad := fmt.Errorf("launch environment: SLURM_JOB_NODELIST=%q: cannot read its first host (set MASTER_ADDR)", list)
	first := list
	if i := strings.IndexAny(list, ",["); i >= 0 && list[i] == ',' {
		first = list[:i]
	}
	open := strings.IndexByte(first, '[')
	if open < 0 {
		if first == "" {
			return "", bad
		}
		return first, nil
	}
	end := strings.IndexByte(first[open:], ']')
	if open == 0 || end < 0 {
		return "", bad
	}
	r := first[open+1 : open+end]
	r, _, _ = strings.Cut(r, ",")
	r, _, _ = strings.Cut(r, "-")
	if _, err := strconv.Atoi(r); err != nil {
		return "", bad
	}
	return first[:open] + r, nil
}
