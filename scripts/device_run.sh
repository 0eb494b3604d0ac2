#!/usr/bin/env bash
# One call on the GPU machine: step benchmark, PyTorch peer, Fashion-MNIST
# runs of every plugin, ranks sharing the GPU, Gemini budgets, interop.
# Expects (carried in .dev/): resnetlab (CGO_ENABLED=0 build), torch_peer.py,
# fmnist/*.gz. Everything it prints goes to $OUT/device.log too; results,
# PTX-free logs and JSON come back in $OUT/device.tgz.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/w
B=$PWD/.dev/resnetlab
export DATA=$PWD/.dev/fmnist PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
LOG=$OUT/device.log
exec > >(tee -a "$LOG") 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
spec() { # spec NAME EPOCHS [extra TOML lines...]: a Fashion-MNIST spec in /tmp/w
	local name=$1 epochs=$2; shift 2
	{
		echo "name = \"$name\""
		echo 'dataset = "fashion-mnist"'
		echo "epochs = $epochs"
		echo 'device = "cuda"'
		echo "checkpoint = \"/tmp/w/ckpt/{name}/{plugin}-{precision}-{gpus}\""
		echo "interval = $epochs"
		echo 'results_dir = "/tmp/w/results"'
		printf '%s\n' "$@"
	} >/tmp/w/$name.toml
	echo /tmp/w/$name.toml
}

step "machine"; nvidia-smi -L; nproc

step "step benchmark (resnetlab bench, fixed batch on the device)"
timeout 120 $B bench --device cuda --steps 200 --warmup 20 --precision fp32,fp16,bf16
timeout 60 $B bench --device cuda --steps 100 --warmup 10 --precision fp16,bf16 --plugin low_level_zero

step "PyTorch peer, synthetic, 1 epoch each (speed)"
timeout 90 python3 .dev/torch_peer.py --data synthetic --epochs 1
timeout 90 python3 .dev/torch_peer.py --data synthetic --epochs 1 --amp

step "resnetlab torch_ddp fp32, Fashion-MNIST, 12 epochs (alone: epoch times)"
timeout 200 $B run --headless "$(spec fp32 12 '[[run]]' 'plugin = "torch_ddp"' 'precision = "fp32"')"

step "PyTorch peer fp32 Fashion-MNIST 12 epochs (background) + our mixed-precision plugins"
(timeout 240 python3 .dev/torch_peer.py --data .dev/fmnist --epochs 12 > /tmp/w/peer_fmnist.log 2>&1) &
peer=$!
timeout 330 $B run --headless "$(spec mixed 12 '[[run]]' 'plugin = "torch_ddp_fp16"' '[[run]]' 'plugin = "low_level_zero"' '[[run]]' 'plugin = "gemini"')"
wait $peer; cat /tmp/w/peer_fmnist.log

step "2 ranks sharing the GPU, 1 epoch"
timeout 120 $B run --headless "$(spec shared 1 '[[run]]' 'plugin = "torch_ddp"' 'gpus = 2' '[[run]]' 'plugin = "low_level_zero"' 'gpus = 2')"

step "results"
$B compare /tmp/w/results
cd /tmp/w && tar czf "$OUT/device.tgz" results *.log *.toml 2>/dev/null
