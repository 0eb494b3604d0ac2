package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"resnetlab/comm"
	"resnetlab/fsutil"
	"resnetlab/runner"
	"resnetlab/spec"
)

// joinWorld makes this process a rank of a multi-process run when a
// launcher (torchrun, srun, resnetlab launch) started it: it joins the
// world at MASTER_ADDR:MASTER_PORT, where rank 0 checks that every rank
// runs the same spec, options and binary. It returns nil with no launcher;
// a launcher's world of one is a world too (its store, NCCL through it).
func joinWorld(ctx context.Context, specPath string, sp *spec.Spec, cells []spec.Cell, opts runner.RunOptions) (*comm.ProcComm, error) {
	env, ok, err := comm.EnvFromLaunch()
	if err != nil || !ok {
		return nil, err
	}
	if err := checkWorldSpec(sp, cells, env); err != nil {
		return nil, err
	}
	fp, err := fingerprint(specPath, opts)
	if err != nil {
		return nil, err
	}
	return comm.JoinWorld(ctx, env, fp)
}

// progName is how the user started this process, the first words of its
// errors: `resnetlab launch` for the ranks a launch started (it sets
// comm.LaunchVar), else `resnetlab run`.
func progName() string {
	if os.Getenv(comm.LaunchVar) != "" {
		return "resnetlab launch"
	}
	return "resnetlab run"
}

// checkWorldSpec refuses, on this rank alone and before the rendezvous,
// a spec that is not one run of the launcher's world size: waiting for
// ranks the launcher never started (or rank 0 never waits for) would take
// the whole rendezvous timeout before the runner's own check said so.
// The messages are the runner's (runner/dist.go), naming this rank.
func checkWorldSpec(sp *spec.Spec, cells []spec.Cell, env comm.Env) error {
	if err := runner.CheckWorldGrid(sp.File, cells, runner.LauncherWorld(env.WorldSize)); err != nil {
		host, _ := os.Hostname()
		return fmt.Errorf("rank %d (host %s): %w", env.Rank, host, err)
	}
	return nil
}

// fingerprint digests what must agree between the ranks: the binary, the
// spec's bytes and the options that change the training.
func fingerprint(specPath string, opts runner.RunOptions) (string, error) {
	h := sha256.New()
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("rendezvous: cannot find this binary to fingerprint it: %w", err)
	}
	f, err := fsutil.OpenRegular(exe)
	if err != nil {
		return "", fmt.Errorf("rendezvous: fingerprinting this binary: %w", err)
	}
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", fmt.Errorf("rendezvous: fingerprinting %s: %w", exe, err)
	}
	spec, err := fsutil.ReadFile(specPath, 4<<20) // LoadSpec read it within the same cap
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "\x00spec %d\x00", len(spec))
	h.Write(spec)
	fmt.Fprintf(h, "\x00resume %d device %q", opts.Resume, opts.Device)
	if len(opts.Runs) > 0 {
		fmt.Fprintf(h, " runs %q", opts.Runs)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
