#!/usr/bin/env bash
# hostcheck.sh type-checks CUDA sources with the host C++ compiler on a
# machine without nvcc: g++ -fsyntax-only with hoststub/ standing in for the
# CUDA headers and keywords. It instantiates every kernel template, so it
# catches syntax and type errors; it proves nothing about device code
# generation or behaviour (gen.sh and the device tests do that).
#   bash kernels/cuda/hostcheck.sh [FILE.cu...]   (default: src/*.cu)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
files=("$@")
[ ${#files[@]} -eq 0 ] && files=("$here"/src/*.cu)
rc=0
for f in "${files[@]}"; do
  if g++ -std=c++17 -fsyntax-only -Wall -Wno-unknown-pragmas -Wno-unused-variable -Wno-unused-but-set-variable \
    -I"$here/hoststub" -include cuda_stub.h -x c++ "$f"; then
    echo "ok   $f"
  else
    echo "FAIL $f"
    rc=1
  fi
done
exit $rc
