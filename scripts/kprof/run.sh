#!/usr/bin/env bash
# Usage: scripts/kprof/run.sh OUT.txt COMMAND [ARGS...]
# Runs COMMAND with kprof.c injected (CUDA_INJECTION64_PATH) and leaves the
# device time per kernel and launch shape in OUT.txt. Needs a C compiler and
# CUPTI's headers and library (the CUDA toolkit's extras/CUPTI, or the
# nvidia-cuda-cupti wheel beside PyTorch); both are looked up here.
set -euo pipefail
out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
hdr=$(find /usr/local/cuda*/ /usr/local/lib/python3*/ /usr/lib/python3*/ / -xdev -name cupti_activity.h 2>/dev/null | head -1 || true)
[ -n "$hdr" ] || { echo "kprof: no cupti_activity.h found" >&2; exit 1; }
inc=$(dirname "$hdr")
lib=$(find "$(dirname "$inc")" /usr/local/cuda*/ / -xdev -name 'libcupti.so*' 2>/dev/null | head -1 || true)
[ -n "$lib" ] || { echo "kprof: no libcupti.so found" >&2; exit 1; }
krec=$(grep -o 'CUpti_ActivityKernel[0-9]*' "$inc"/cupti_activity*.h | sed 's/.*Kernel//' | sort -n | tail -1)
so=${TMPDIR:-/tmp}/libkprof.so
cc -O2 -shared -fPIC -pthread -o "$so" "$here/kprof.c" -I"$inc" -I/usr/local/cuda/include -DKREC=CUpti_ActivityKernel"$krec" \
	"$lib" -Wl,-rpath,"$(dirname "$lib")"
echo "kprof: $so (CUpti_ActivityKernel$krec, $lib)" >&2
CUDA_INJECTION64_PATH=$so KPROF_OUT=$out "$@"
