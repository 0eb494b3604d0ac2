#!/usr/bin/env bash
# Runs on the GPU machine (the device tool), from the repository root:
#
#   bash scripts/device_run.sh STAGE...
#
# Stages (each bounded by `timeout`; a failed stage does not stop the rest):
#   bench     step benchmark of resnetlab (fixed batch on the device) and the
#             PyTorch peer's synthetic epoch (fp32 and --amp): speed ratios
#   quick     every plugin for 1 Fashion-MNIST epoch, 2 ranks sharing the GPU
#   gemini    gemini at unlimited, 1/2 and 1/4 of the measured footprint
#   gemini2   the same three runs with [gemini] max_prefetch (GEM_PREFETCH,
#             default 4): chunk moves on the copy stream, prefetched; the
#             budgets come from gem_full's peak when stage gemini ran in
#             this call, else GEM_PEAK, else gem2_full's own peak
#   mover     the copy-stream device tests: .dev/cuda.test (round trip,
#             ordering, overlap) and .dev/memory_gpu.test (sync vs async vs
#             prefetch at two budgets: bit-identical weights, ms/step)
#   fmnist    every plugin 12 epochs beside the PyTorch peer (fp32 and amp,
#             in the background), then the interop stage
#   interop   scripts/interop_device.sh (PyTorch loads our exports and back)
#   resume    2 epochs straight == 1 epoch + resume in a new process + 1
#   shared2   torch_ddp_fp16 with 2 ranks sharing the GPU, 1 epoch
#   concurrent  two runs at once on the GPU (concurrent = true) give the
#             model digests they give one after another; with
#             share_devices = false they fall back to one after another
#   table80   issue 9's 80-epoch table: every plugin and both peers at once,
#             each resuming from its own checkpoint; call it again on the warm
#             machine until done (T80_DEADLINE seconds per call)
#
# Expects (carried in .dev/): resnetlab (CGO_ENABLED=0 build), torch_peer.py,
# fmnist/*.gz; for stage mover the test binaries (built here with
# CGO_ENABLED=0 go test -c -o .dev/cuda.test ./kernels/cuda and
# CGO_ENABLED=0 go test -c -tags gpu -o .dev/memory_gpu.test ./memory). Everything printed goes to $OUT/device.log too; result JSON,
# logs and specs come back in $OUT/device.tgz.
set -u
OUT=${OUT:-/tmp/out}
EPOCHS=${EPOCHS:-12}
mkdir -p "$OUT" /tmp/w
B=${B:-$PWD/.dev/resnetlab}
export DATA=$PWD/.dev/fmnist PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
LOG=$OUT/device.log
exec > >(tee -a "$LOG") 2>&1
step() { echo; echo "=== $(date +%T) $*"; }

# spec NAME EPOCHS [TOML lines...]: writes a Fashion-MNIST spec to /tmp/w.
spec() {
	local name=$1 epochs=$2
	shift 2
	{
		echo "name = \"$name\""
		echo 'dataset = "fashion-mnist"'
		echo "epochs = $epochs"
		echo 'device = "cuda"'
		echo "checkpoint = \"/tmp/w/ckpt/{name}/{plugin}-{precision}-{gpus}\""
		echo "interval = $epochs"
		echo 'results_dir = "/tmp/w/results"'
		printf '%s\n' "$@"
	} >"/tmp/w/$name.toml"
	echo "/tmp/w/$name.toml"
}

# peak NAME: the first run's peak device bytes in the results of spec NAME.
peak() {
	python3 - "$1" <<'EOF'
import glob, json, sys
for f in sorted(glob.glob(f"/tmp/w/results/{sys.argv[1]}-*.json")):
    r = json.load(open(f))
    print(max(r.get("peak_device_bytes_per_rank") or [0])); break
EOF
}

stage_bench() {
	step "machine"
	nvidia-smi -L
	nproc
	step "resnetlab bench: one rank, fixed batch of 100 on the device"
	timeout 120 "$B" bench --device cuda --steps 300 --warmup 30 --precision fp32,fp16,bf16
	timeout 60 "$B" bench --device cuda --steps 200 --warmup 20 --precision fp16 --plugin low_level_zero
	step "PyTorch peer, synthetic data, 1 epoch (speed)"
	timeout 120 python3 .dev/torch_peer.py --data synthetic --epochs 1
	timeout 120 python3 .dev/torch_peer.py --data synthetic --epochs 1 --amp
}

stage_quick() {
	step "every plugin, 1 Fashion-MNIST epoch, one after another"
	timeout 240 "$B" run --headless "$(spec quick 1 '[grid]' \
		'plugin = ["torch_ddp", "torch_ddp_fp16", "low_level_zero", "gemini"]')"
	step "2 ranks sharing the GPU, 1 epoch"
	timeout 200 "$B" run --headless "$(spec shared 1 '[grid]' \
		'plugin = ["torch_ddp", "low_level_zero", "gemini"]' 'gpus = [2]')"
}

stage_shared2() {
	step "torch_ddp_fp16, 2 ranks sharing the GPU, 1 epoch"
	timeout 100 "$B" run --headless "$(spec shared2 1 '[[run]]' 'plugin = "torch_ddp_fp16"' 'gpus = 2')"
}

stage_concurrent() {
	step "concurrent = true: torch_ddp_fp16 and gemini at once on the GPU, then one after another"
	local runs=('[[run]]' 'plugin = "torch_ddp_fp16"' '[[run]]' 'plugin = "gemini"')
	timeout 200 "$B" run --headless "$(spec cc_at_once 1 'concurrent = true' "${runs[@]}")" |
		grep -E 'train at once|started|done:|FAILED'
	timeout 200 "$B" run --headless "$(spec cc_in_turn 1 "${runs[@]}")" | grep -E 'started|done:|FAILED'
	grep -H model_sha256 /tmp/w/results/cc_at_once-*.json /tmp/w/results/cc_in_turn-*.json
	timeout 200 "$B" run --headless "$(spec cc_no_share 1 'concurrent = true' 'share_devices = false' "${runs[@]}")" |
		grep -E 'one after another|started|done:|FAILED'
}

stage_gemini() {
	step "gemini budgets: unlimited, then 1/2 and 1/4 of its peak"
	timeout 120 "$B" run --headless "$(spec gem_full 1 '[[run]]' 'plugin = "gemini"')"
	local p
	p=$(peak gem_full)
	echo "gemini unlimited peak: $p bytes"
	for frac in 2 4; do
		timeout 200 "$B" run --headless "$(spec "gem_1_$frac" 1 '[[run]]' 'plugin = "gemini"' \
			'[gemini]' 'placement = "auto"' "device_budget = $((p / frac))")"
	done
}

# Issue 5's prefetch: stage_gemini's runs with the chunk moves on the copy
# stream and the next GEM_PREFETCH chunks uploaded ahead. The end-of-run
# log line "gemini rank 0: ... moves, ... prefetched, ... stalls" says how
# much traffic there was and how much of it the prefetch hid.
stage_gemini2() {
	local pf=${GEM_PREFETCH:-4} p
	step "gemini budgets with max_prefetch = $pf: unlimited, then 1/2 and 1/4 of the unlimited peak"
	timeout 120 "$B" run --headless "$(spec gem2_full 1 '[[run]]' 'plugin = "gemini"' '[gemini]' "max_prefetch = $pf")"
	p=${GEM_PEAK:-$(peak gem_full)}
	if [ -z "$p" ] || [ "$p" = 0 ]; then
		p=$(peak gem2_full)
	fi
	echo "budgets from an unlimited peak of $p bytes"
	for frac in 2 4; do
		timeout 220 "$B" run --headless "$(spec "gem2_1_$frac" 1 '[[run]]' 'plugin = "gemini"' \
			'[gemini]' 'placement = "auto"' "device_budget = $((p / frac))" "max_prefetch = $pf")"
	done
}

stage_mover() {
	step "copy-stream device tests"
	if [ -x .dev/cuda.test ]; then
		timeout 120 .dev/cuda.test -test.run Mover -test.v
	else
		echo "no .dev/cuda.test (build: CGO_ENABLED=0 go test -c -o .dev/cuda.test ./kernels/cuda)"
	fi
	if [ -x .dev/memory_gpu.test ]; then
		timeout 400 .dev/memory_gpu.test -test.run GPUPrefetch -test.v
	else
		echo "no .dev/memory_gpu.test (build: CGO_ENABLED=0 go test -c -tags gpu -o .dev/memory_gpu.test ./memory)"
	fi
}

stage_fmnist() {
	step "PyTorch peer fp32 and amp, $EPOCHS epochs (background), beside every plugin, then interop"
	(timeout 420 python3 .dev/torch_peer.py --data .dev/fmnist --epochs "$EPOCHS" >/tmp/w/peer_fp32.log 2>&1) &
	(timeout 420 python3 .dev/torch_peer.py --data .dev/fmnist --epochs "$EPOCHS" --amp >/tmp/w/peer_amp.log 2>&1) &
	stage_long &
	timeout 300 "$B" run --headless "$(spec fmnist "$EPOCHS" '[grid]' \
		'plugin = ["torch_ddp", "torch_ddp_fp16", "low_level_zero", "gemini"]')"
	stage_interop
	wait
	tail -n 3 /tmp/w/peer_fp32.log /tmp/w/peer_amp.log
}

# The reference's 80 epochs for torch_ddp fp32 (issue 9), in the background:
# SIGTERM at the timeout checkpoints it, and `LONG_RESUME=E` continues it
# from epoch E in a later call on the same (warm) machine.
stage_long() {
	local plugins=${LONG_PLUGINS:-'"torch_ddp"'} f from=${LONG_RESUME:-0}
	if [ "$from" = auto ]; then # the latest checkpoint of the first run
		from=$(ls /tmp/w/ckpt/long80/*/ 2>/dev/null | sed -n 's/^model_\([0-9]*\)\.pth$/\1/p' | sort -n | tail -1)
		from=${from:-0}
	fi
	f=$(spec long80 80 'interval = 10' 'milestones = [20, 40, 60, 80]' "resume = $from" \
		'[grid]' "plugin = [$plugins]")
	sed -i '/^interval = 80$/d' "$f"
	timeout "${LONG_TIMEOUT:-480}" "$B" run --headless "$f" >/tmp/w/long80.log 2>&1
	tail -n 4 /tmp/w/long80.log
}

# Resume on the GPU: 2 epochs straight vs 1 epoch, a new process, resume 1,
# one more epoch; the model files must be bit-identical.
stage_resume() {
	step "resume on the GPU is bit-exact (torch_ddp fp16)"
	timeout 60 "$B" run --headless "$(spec rs_a 2 '[[run]]' 'plugin = "torch_ddp_fp16"')" | tail -n 1
	timeout 60 "$B" run --headless "$(spec rs_b 1 '[[run]]' 'plugin = "torch_ddp_fp16"')" | tail -n 1
	timeout 60 "$B" run --headless "$(spec rs_b 2 'resume = 1' '[[run]]' 'plugin = "torch_ddp_fp16"')" | tail -n 1
	grep -h model_sha256 /tmp/w/results/rs_a-*.json /tmp/w/results/rs_b-*.json
}

# t80_run PLUGIN: one 80-epoch run, from its latest checkpoint (if any).
t80_run() {
	local plugin=$1 f from
	from=$(ls /tmp/w/ckpt/t80_"$plugin"/*/ 2>/dev/null | sed -n 's/^model_\([0-9]*\)\.pth$/\1/p' | sort -n | tail -1)
	from=${from:-0}
	[ "$from" = 80 ] && return
	f=$(spec t80_"$plugin" 80 'interval = 10' 'milestones = [20, 40, 60, 80]' "resume = $from" \
		'[[run]]' "plugin = \"$plugin\"")
	sed -i '/^interval = 80$/d' "$f"
	exec "$B" run --headless "$f" >>/tmp/w/t80_"$plugin".log 2>&1
}

# Issue 9: four resnetlab processes and both PyTorch peers share the GPU. At
# the deadline every one gets SIGTERM: resnetlab checkpoints the epoch it is
# in, the peer (scripts/torch_peer_resume.py) saved its last epoch; the next
# call continues both.
stage_table80() {
	local p pids=() killer
	step "80-epoch table, every plugin beside the peers (deadline ${T80_DEADLINE:-540} s)"
	for p in fp32 amp; do
		grep -q '"summary"' /tmp/w/peer80_$p.log 2>/dev/null && continue
		python3 scripts/torch_peer_resume.py --data .dev/fmnist --epochs 80 \
			$([ $p = amp ] && echo --amp) --ckpt /tmp/w/peer80_$p.pt >>/tmp/w/peer80_$p.log 2>&1 &
		pids+=($!)
	done
	for p in torch_ddp torch_ddp_fp16 low_level_zero gemini; do
		t80_run $p &
		pids+=($!)
	done
	(sleep "${T80_DEADLINE:-540}" && kill -TERM "${pids[@]}" 2>/dev/null) &
	killer=$!
	wait "${pids[@]}"
	kill "$killer" 2>/dev/null
	for p in /tmp/w/t80_*.log /tmp/w/peer80_*.log; do
		echo "--- $p"
		tail -n 2 "$p"
	done
}

stage_interop() {
	step "interop with PyTorch"
	OUT=/tmp/w/interop timeout 170 bash scripts/interop_device.sh
}

for s in "$@"; do
	"stage_$s"
done
step "results"
"$B" compare /tmp/w/results
cd /tmp/w && tar czf "$OUT/device.tgz" results ./*.log ./*.toml interop 2>/dev/null
ls -la "$OUT"
