#!/usr/bin/env bash
# Usage: scripts/convbench/run.sh [OTHER_CONV_CU]
# Builds convbench.cu with nvcc (PTX for compute_80, JIT-compiled by the
# driver as the backend's embedded PTX is) and runs it; with an argument it
# also builds it against that conv.cu and prints both side by side
# (this tree | the other).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
flags=(-std=c++17 -O3 -gencode arch=compute_80,code=compute_80)
nvcc "${flags[@]}" -o /tmp/convbench "$here/convbench.cu"
if [ $# -eq 0 ]; then
	/tmp/convbench
	exit
fi
other=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
nvcc "${flags[@]}" -DCONV_SRC="\"$other\"" -o /tmp/convbench_other "$here/convbench.cu"
paste -d'|' <(/tmp/convbench | grep -v scalar) <(/tmp/convbench_other | grep -v scalar | cut -c60-)
