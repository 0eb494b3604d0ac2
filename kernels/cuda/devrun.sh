#!/usr/bin/env bash
# devrun.sh is one device-machine call of the CUDA development loop, run
# from the repository root after building the test binary on the Go side:
#   CGO_ENABLED=0 go test -c -o .dev/cudatest ./kernels/cuda   (carry .dev)
# It generates PTX with gen.sh, runs the package's tests (one process per
# group, so a panic loses one group only) and benchmarks on that PTX
# (RESNETLAB_PTX_DIR), and packs PTX and logs into $OUT/cuda.tgz.
# TESTS, BENCH and BENCHTIME select tests and benchmarks.
set -uo pipefail
root=$(pwd)
work=/tmp/cudadev
rm -rf "$work" && mkdir -p "$work/ptx"
touch "$work/test.log" "$work/report.log" "$work/bench.log"
pack() { tar -C "$work" -czf "$OUT/cuda.tgz" ptx gen.log test.log report.log smi.txt 2>/dev/null; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >"$work/smi.txt" 2>&1
cat "$work/smi.txt"
bash kernels/cuda/gen.sh "$work/ptx" >"$work/gen.log" 2>&1
grep -E "^==|error" "$work/gen.log" | head -40
cd kernels/cuda
export RESNETLAB_PTX_DIR="$work/ptx"
rc=0
for t in ${TESTS:-PTX F16 Narrow Elementwise ConvMatches ConvDet Linear BatchNorm Pooling Softmax Adam Augment NonFinite Memory Driver Graph ResNet18Trains}; do
  timeout 90 "$root/.dev/cudatest" -test.v -test.run "$t" >>"$work/test.log" 2>&1 || { echo "--- FAIL: group $t (exit $?)" >>"$work/test.log"; rc=1; }
done
grep -E "^(--- FAIL|FAIL)|relative error|panic|error text|loss |differs|missed|overwrote" "$work/test.log" | head -120
for bench in ${BENCH:-ResNet18Step ConvResNet18 AugmentBatch}; do
  timeout 120 "$root/.dev/cudatest" -test.run '^$' -test.bench "$bench" -test.benchtime "${BENCHTIME:-20x}" >>"$work/bench.log" 2>&1 || rc=1
done
cat "$work/bench.log" >>"$work/test.log"
sleep 1
pack
grep -E "ms/step|us/call|FAIL|panic" "$work/bench.log" | sed -e 's/ns\/op//' | awk '{$2=""; print}' | head -90
echo "exit $rc"
exit $rc
