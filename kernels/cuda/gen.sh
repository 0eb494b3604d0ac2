#!/usr/bin/env bash
# gen.sh regenerates the PTX that the CUDA backend embeds. It needs nvcc, so
# it runs on the device machine: one PTX file per kernels/cuda/src/*.cu,
# written to $1 (default kernels/cuda/ptx). The first line of each PTX file
# records the SHA-256 of the source it came from; ptx_test.go checks it, so
# a stale PTX fails CI. With REPORT=1 it prints ptxas' register and spill
# report for sm_90 instead.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/ptx}
mkdir -p "$out"
flags=(-std=c++17 -O3 -lineinfo)
rc=0
for src in "$here"/src/*.cu; do
  name=$(basename "$src" .cu)
  if [ "${REPORT:-0}" = 1 ]; then
    echo "== $name: ptxas report (sm_90)"
    nvcc -cubin -arch=sm_90 "${flags[@]}" -Xptxas -v -o /dev/null "$src" 2>&1 | grep -E "Compiling entry|registers|spill"
    continue
  fi
  sum=$(sha256sum "$src" | cut -d' ' -f1)
  tmp=$(mktemp)
  if nvcc -ptx -arch=compute_80 "${flags[@]}" -o "$tmp" "$src"; then
    { echo "// sha256 $sum src/$name.cu"; cat "$tmp"; } >"$out/$name.ptx"
    echo "== $name: ok"
  else
    echo "== $name: nvcc FAILED"
    rc=1
  fi
  rm -f "$tmp"
done
exit $rc
