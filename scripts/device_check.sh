#!/usr/bin/env bash
# device_check.sh is the one device-machine call: it regenerates the PTX
# from kernels/cuda/src (gen.sh, nvcc), runs every package's GPU tests on
# that PTX, then `resnetlab bench` and the given experiments. Logs and the
# PTX land in $OUT (ptx/*.ptx, tests.log, bench.log, experiments.log).
#
# Build on the Go side first (the device machine has no Go), then carry .dev:
#   bash scripts/device_check.sh build
# and on the device machine, from the repository root:
#   bash scripts/device_check.sh [experiments/smoke.toml ...]
# GPU tests skip themselves without a device (kernels/cuda/helpers_test.go)
# or sit behind the `gpu` build tag (gemini); build adds the tag everywhere.
# TESTS (a -test.run pattern) narrows the tests; BENCH=0 skips the bench.
set -uo pipefail
pkgs=(kernels/cuda comm engine gemini runner)
bin() { echo ".dev/${1//\//_}.test"; }

if [ "${1:-}" = build ]; then
  mkdir -p .dev
  for p in "${pkgs[@]}"; do
    CGO_ENABLED=0 go test -c -tags gpu -ldflags='-s -w' -o "$(bin "$p")" "./$p" || exit 1
  done
  CGO_ENABLED=0 go build -ldflags='-s -w' -o .dev/resnetlab ./cmd/resnetlab || exit 1
  # experiments/fmnist.toml needs the data: cp -r /usr/share/datasets/fashion-mnist .dev/fmnist
  du -sh .dev
  exit 0
fi

OUT=${OUT:-/tmp/device_check}
root=$(pwd)
mkdir -p "$OUT/ptx"
export NCCL_NVLS_ENABLE=0 DATA=$root/.dev/fmnist
rc=0
nvidia-smi -L | tee "$OUT/tests.log"

# Kernels first: every test below runs on the PTX of today's sources.
if bash kernels/cuda/gen.sh "$OUT/ptx" >>"$OUT/tests.log" 2>&1; then
  export RESNETLAB_PTX_DIR=$OUT/ptx
else
  echo "gen.sh failed: tests run on the embedded PTX" | tee -a "$OUT/tests.log"
  rc=1
fi

for p in "${pkgs[@]}"; do
  b=$root/$(bin "$p")
  [ -x "$b" ] || { echo "== $p: no $b (run build first)"; rc=1; continue; }
  echo "== $p" | tee -a "$OUT/tests.log"
  (cd "$p" && timeout "${TEST_TIMEOUT:-240}" "$b" -test.v -test.run "${TESTS:-.}" -test.timeout 230s) \
    >>"$OUT/tests.log" 2>&1 || { echo "--- FAIL: package $p" >>"$OUT/tests.log"; rc=1; }
done
grep -E "^(--- FAIL|FAIL|ok|PASS)|^== |panic:" "$OUT/tests.log" | head -60

if [ "${BENCH:-1}" = 1 ]; then
  timeout 120 .dev/resnetlab bench --device cuda --steps 200 --warmup 20 --precision fp32,fp16,bf16 \
    >"$OUT/bench.log" 2>&1 || rc=1
  cat "$OUT/bench.log"
fi

for spec in "$@"; do
  echo "== $spec" | tee -a "$OUT/experiments.log"
  timeout 300 .dev/resnetlab run --headless "$spec" >>"$OUT/experiments.log" 2>&1 || rc=1
  tail -5 "$OUT/experiments.log"
done
echo "exit $rc"
exit $rc
